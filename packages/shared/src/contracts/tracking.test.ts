import { describe, expect, it } from "vitest";
import { acceptScanEvent, AssetPositionEvent, AssetPositionItem, positionEventsOf, ScanEvent } from "./tracking.ts";

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

describe("acceptScanEvent", () => {
  const tag = (value: string) => ({ tag_type: "rfid", value });
  const valid: unknown[] = [
    { event_id: "e-1", observed_at: "2026-11-20T10:00:00.123456Z", location: { id: 3 }, tags: [tag("A")] },
    { observed_at: "2026-11-20T12:00:00.123456789+02:00", location: { external_key: "dock" }, antenna: 0, tags: Array.from({ length: 10 }, (_, i) => tag(`T${i}`)) },
    { event_id: "x".repeat(255), observed_at: "2026-11-20T10:00:00Z", location: { tag_type: "ble", value: "L" }, tags: Array.from({ length: 1000 }, (_, i) => tag(`${i}`.padEnd(255, "v"))) },
    { observed_at: "2026-11-20T10:00:00.5Z", antenna: 2147483647, tags: [{ value: "B", tag_type: "barcode" }] },
  ];
  const DELETE = Symbol("delete");
  const replacements: unknown[] = [
    DELETE, null, "", "x", "a".repeat(255), "a".repeat(256), 0, -0, -1, 1, 1.5, 2147483647, 2147483648, true, [], {},
    [tag("A")], { id: 1 }, { external_key: "k" }, tag("L"), "2026-02-30T00:00:00Z", "2026-11-20T10:00:00Z", "2026-11-20 10:00:00Z",
  ];

  /** Every path of a payload (tags: the first and the last only), each object's own. */
  function paths(value: unknown, at: Array<string | number> = []): Array<Array<string | number>> {
    const out: Array<Array<string | number>> = [];
    if (Array.isArray(value)) {
      for (const i of new Set([0, value.length - 1])) if (i >= 0) out.push([...at, i], ...paths(value[i], [...at, i]));
    } else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) out.push([...at, k], ...paths(v, [...at, k]));
    }
    return out;
  }

  function mutated(base: unknown, path: Array<string | number>, replacement: unknown): unknown {
    const copy = structuredClone(base) as Record<string | number, unknown>;
    let parent = copy;
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
    const last = path.at(-1)!;
    if (replacement !== DELETE) parent[last] = replacement;
    else if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
    return copy;
  }

  /** The payload's JSON text with `member` written first in the object at `path`. */
  function withMember(base: unknown, path: Array<string | number>, member: string): string {
    if (!path.length) return `{${member},${JSON.stringify(base).slice(1)}`;
    const target = path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], base);
    return JSON.stringify(mutated(base, path, "\u0000")).replace('"\\u0000"', `{${member},${JSON.stringify(target).slice(1)}`);
  }

  /** Candidates as the wire gives them: through JSON text, so every one is what JSON.parse returns. */
  function* candidates(): Generator<string> {
    for (const base of valid) {
      yield JSON.stringify(base);
      const objects = [[], ...paths(base)].filter((p) => {
        let v: unknown = base;
        for (const k of p) v = (v as Record<string | number, unknown>)[k];
        return typeof v === "object" && v !== null && !Array.isArray(v);
      });
      for (const path of paths(base)) for (const r of replacements) yield JSON.stringify(mutated(base, path, r));
      // Unknown keys (one named __proto__ too, which JSON.parse makes an own property) at every object.
      for (const path of objects) for (const member of ['"extra":1', '"__proto__":{}']) yield withMember(base, path, member);
      const tags = (base as { tags: unknown[] }).tags;
      yield JSON.stringify({ ...(base as object), tags: [] });
      yield JSON.stringify({ ...(base as object), tags: Array.from({ length: 1001 }, (_, i) => tags[i % tags.length]) });
    }
    for (const other of ["null", "[]", '"scan"', "7", "{}"]) yield other;
  }

  it("gives ScanEvent's verdict on every payload, and ScanEvent's data when it accepts", () => {
    let accepted = 0;
    let refused = 0;
    for (const text of candidates()) {
      const json: unknown = JSON.parse(text);
      const fast = acceptScanEvent(json);
      const schema = ScanEvent.safeParse(json);
      expect({ text: text.slice(0, 200), accepted: fast !== undefined }).toEqual({ text: text.slice(0, 200), accepted: schema.success });
      if (fast !== undefined) {
        expect(fast).toEqual(schema.data);
        accepted++;
      } else refused++;
    }
    // Both verdicts were exercised, on the valid payloads and on many mutations of each.
    expect(accepted).toBeGreaterThan(valid.length * 5);
    expect(refused).toBeGreaterThan(valid.length * 50);
  });

  it("answers with the payload itself: nothing copied", () => {
    for (const payload of valid) expect(acceptScanEvent(payload)).toBe(payload);
  });
});
