import { describe, expect, it } from "vitest";
import { AssetPositionEvent, AssetPositionItem, positionEventsOf } from "./tracking.ts";

const item = (assetId: number, verb: "moved" | "seen") => ({
  event_id: `${verb}:3:${assetId}:4`,
  asset_id: assetId,
  location_id: 9,
  observed_at: "2026-11-20T10:00:00.123456Z",
  seq: 4,
  previous_location_id: verb === "moved" ? 8 : 9,
  verb,
});

describe("positionEventsOf", () => {
  it("turns a batch message into one event per item: every field of the item, the batch's organization", () => {
    const events = positionEventsOf("tracking.events.3.asset.positions", { version: 1, org_id: 3, positions: [item(1, "moved"), item(2, "seen")] });
    expect(events).toStrictEqual([
      { version: 1, org_id: 3, ...item(1, "moved") },
      { version: 1, org_id: 3, ...item(2, "seen") },
    ]);
    // Built field by field: no field of the contract is left out.
    const fields = [...Object.keys(AssetPositionItem.shape), ...Object.keys(AssetPositionEvent.shape)];
    for (const event of events!) expect(Object.keys(event).sort()).toEqual([...new Set(fields)].sort());
  });

  it("keeps a first placement's absent previous location absent in meaning", () => {
    const { previous_location_id: _, ...first } = item(5, "moved");
    const [event] = positionEventsOf("tracking.events.3.asset.positions", { version: 1, org_id: 3, positions: [first] })!;
    expect(event!.previous_location_id ?? null).toBeNull();
    expect(JSON.parse(JSON.stringify(event))).toEqual({ version: 1, org_id: 3, ...first });
  });

  it("refuses a malformed batch, and reads the per-asset form with its verb from the subject", () => {
    expect(positionEventsOf("tracking.events.3.asset.positions", { version: 1, org_id: 3, positions: [{ ...item(1, "seen"), seq: -1 }] })).toBeUndefined();
    expect(positionEventsOf("tracking.events.3.asset.positions", { version: 1, org_id: 3, positions: [] })).toBeUndefined();
    const { verb: _, ...single } = item(7, "moved");
    expect(positionEventsOf("tracking.events.3.asset.moved", { version: 1, org_id: 3, ...single })).toEqual([{ version: 1, org_id: 3, ...item(7, "moved") }]);
    expect(positionEventsOf("tracking.events.3.asset.lost", { version: 1, org_id: 3, ...single })).toBeUndefined();
  });
});
