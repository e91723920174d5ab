import { describe, expect, it } from "vitest";
import { encodeJson } from "@whereabouts/shared";
import { PoisonMessageError, ProjectionBatch } from "./projection-service.ts";
import type { ProjectionStore } from "./projection-store.ts";
import type { PositionRow } from "./projection-types.ts";

const position = (seq: number, observedAt: string, locationId: number) =>
  encodeJson({ version: 1, event_id: `e${seq}`, org_id: 1, asset_id: 9, location_id: locationId, observed_at: observedAt, seq });

describe("ProjectionBatch", () => {
  it("keeps the newest position per asset by (observed_at, seq)", () => {
    const batch = new ProjectionBatch();
    batch.add("tracking", "tracking.events.1.asset.moved", position(5, "2026-11-20T10:00:05Z", 1));
    batch.add("tracking", "tracking.events.1.asset.moved", position(9, "2026-11-20T10:00:00Z", 2));
    batch.add("tracking", "tracking.events.1.asset.seen", position(6, "2026-11-20T10:00:05Z", 3));
    expect(batch.size).toBe(1);
    expect(batch.events).toBe(3);
  });

  it("ignores other subjects and location tags; rejects unusable payloads", () => {
    const batch = new ProjectionBatch();
    expect(batch.add("tracking", "tracking.events.1.scan.ingested", encodeJson({}))).toBe(false);
    expect(batch.add("catalog", "catalog.events.1.widget.created", encodeJson({ entity: "widget" }))).toBe(false);
    expect(() => batch.add("catalog", "catalog.events.1.asset.created", new TextEncoder().encode("{"))).toThrow(PoisonMessageError);
    expect(() => batch.add("tracking", "tracking.events.1.asset.moved", encodeJson({ seq: -1 }))).toThrow(PoisonMessageError);
    expect(batch.size).toBe(0);
  });

  it("carries each asset's arrival: the first event of its trailing run at one place, and whether the run spans the batch", async () => {
    const positionOf = async (...events: Array<[number, string, number]>) => {
      const batch = new ProjectionBatch();
      for (const [seq, at, locationId] of events) batch.add("tracking", "tracking.events.1.asset.moved", position(seq, at, locationId));
      const written: PositionRow[] = [];
      const store = new Proxy({} as ProjectionStore, {
        get: (_, name) => async (_tx: unknown, rows: PositionRow[]) => {
          if (name === "upsertPositions") written.push(...rows);
          return 0;
        },
      });
      await batch.apply({} as never, store);
      return written.map((r) => [r.locationId, r.arrivedAt, r.continues]);
    };
    const [t1, t2, t3] = ["2026-11-20T10:00:01Z", "2026-11-20T10:00:02Z", "2026-11-20T10:00:03Z"];
    expect(await positionOf([1, t1, 7], [2, t2, 7], [3, t3, 7])).toEqual([[7, t1, true]]);
    expect(await positionOf([1, t1, 7], [2, t2, 8], [3, t3, 8])).toEqual([[8, t2, false]]);
    expect(await positionOf([1, t1, 8], [2, t2, 7], [3, t3, 8])).toEqual([[8, t3, false]]);
    // A late event (older than the newest) changes nothing.
    expect(await positionOf([2, t2, 7], [1, t1, 8], [3, t3, 7])).toEqual([[7, t2, true]]);
  });
});
