import { describe, expect, it } from "vitest";
import { applyPosition, fireDue, orderDrafts, type AlertDraft, type AlertSettings, type AssetAlertState, type PlaceFacts } from "./alert-rules.ts";

const S = 1_000_000;
const ids = { orgId: 1, assetId: 7 };
// 10: outside; 20: a zone with children 21 (a zone too) and 22; 30: dwell limit 5 s.
const PLACES: Record<number, PlaceFacts> = {
  10: { zones: [], maxDwellS: null },
  20: { zones: [20], maxDwellS: null },
  21: { zones: [20, 21], maxDwellS: null },
  22: { zones: [20], maxDwellS: null },
  30: { zones: [], maxDwellS: 5 },
};
const places = (id: number) => PLACES[id];

function run(positions: Array<[location: number, seconds: number]>, settings: AlertSettings, state?: AssetAlertState) {
  const out: AlertDraft[] = [];
  let seq = 0;
  for (const [locationId, at] of positions) state = applyPosition(state, ids, { locationId, observedAt: at * S, seq: ++seq }, places, settings, out);
  return { state: state!, out };
}
const brief = (out: AlertDraft[]) => orderDrafts(out).map((d) => [d.type, d.subjectId, d.at / S]);

describe("alert rules", () => {
  const zones = { zoneMinStayS: 10, missingAfterS: 0 };

  it("confirms a crossing from a later scan on the same side, at the crossing's time", () => {
    expect(brief(run([[10, 0], [22, 100], [22, 110]], zones).out)).toEqual([["zone.entered", 20, 100]]);
    // Not yet long enough: nothing, one crossing pending.
    const { state, out } = run([[10, 0], [22, 100], [22, 109]], zones);
    expect(out).toEqual([]);
    expect(state.zones).toEqual([{ zoneId: 20, inside: false, crossedAt: 100 * S }]);
  });

  it("cancels a short visit, ignores moves between children, judges nested zones on their own", () => {
    expect(run([[10, 0], [22, 100], [10, 105], [10, 200]], zones).out).toEqual([]);
    const { out } = run([[10, 0], [21, 100], [22, 120], [21, 125], [22, 130], [22, 150], [10, 200], [10, 300]], zones);
    expect(brief(out)).toEqual([
      ["zone.entered", 20, 100],
      ["zone.entered", 21, 100],
      ["zone.exited", 21, 130],
      ["zone.exited", 20, 200],
    ]);
  });

  it("fires at once with zone_min_stay_s 0, and never for a late scan", () => {
    expect(brief(run([[10, 0], [20, 1]], { zoneMinStayS: 0, missingAfterS: 0 }).out)).toEqual([["zone.entered", 20, 1]]);
    const { state, out } = run([[20, 100], [10, 50]], zones);
    expect(out).toEqual([]);
    expect(state.locationId).toBe(20);
  });

  it("fires dwell once per stay and missing once per absence, from the data or the clock", () => {
    const settings = { zoneMinStayS: 60, missingAfterS: 30 };
    const { state, out } = run([[30, 0], [30, 4], [30, 20]], settings);
    expect(brief(out)).toEqual([["asset.dwell_exceeded", 30, 5]]);
    fireDue(state, 49 * S, places(30), settings, out);
    expect(out).toHaveLength(1);
    fireDue(state, 50 * S, places(30), settings, out);
    fireDue(state, 500 * S, places(30), settings, out);
    expect(brief(out)).toEqual([["asset.dwell_exceeded", 30, 5], ["asset.missing", 30, 50]]);
    // Seen again after the absence; leaves and comes back: a new stay, a new absence.
    const next = run([[30, 600], [10, 601], [30, 602], [30, 700]], settings, state);
    expect(brief(next.out)).toEqual([["asset.dwell_exceeded", 30, 607], ["asset.missing", 30, 632]]);
  });
});
