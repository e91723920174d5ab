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

  it("reads batches of moves (asset.positions) and of sightings (sightings.positions), and nothing else of the kind", () => {
    const item = (asset_id: number, seq: number, verb: "moved" | "seen") => ({
      event_id: `${verb}:1:${asset_id}:${seq}`, asset_id, location_id: 4, observed_at: "2026-11-20T10:00:00Z", seq, previous_location_id: verb === "seen" ? 4 : 3, verb,
    });
    const batch = new ProjectionBatch();
    expect(batch.add("tracking", "tracking.events.1.asset.positions", encodeJson({ version: 1, org_id: 1, positions: [item(1, 1, "moved")] }))).toBe(true);
    expect(batch.add("tracking", "tracking.events.1.sightings.positions", encodeJson({ version: 1, org_id: 1, positions: [item(2, 2, "seen"), item(3, 3, "seen")] }))).toBe(true);
    expect(batch.add("tracking", "tracking.events.1.sightings.other", encodeJson({ version: 1, org_id: 1, positions: [item(4, 4, "seen")] }))).toBe(false);
    expect(batch.size).toBe(3);
    expect(batch.moves.map((m) => m.asset_id)).toEqual([1]);
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

describe("ProjectionBatch with a bulk job's batch message", () => {
  const T = "2026-01-01T00:00:00.000Z";
  const tagEvent = (id: number, value: string) => ({
    version: 1,
    event_id: `t${id}`,
    org_id: 1,
    entity: "tag",
    entity_id: id,
    entity_version: 1,
    verb: "attached",
    occurred_at: T,
    data: { id, tag_type: "rfid", value, owner_type: "asset", owner_id: 40 + id, is_active: true, valid_from: T, valid_to: null, created_at: T, updated_at: T, deleted_at: null },
  });
  const BATCH = "catalog.events.1.batch.events";

  it("adds each event of the batch, as if each had come alone (partner events see every one, in order)", () => {
    const batch = new ProjectionBatch();
    expect(batch.add("catalog", BATCH, encodeJson({ version: 1, org_id: 1, events: [tagEvent(1, "A"), tagEvent(2, "B")] }))).toBe(true);
    expect(batch.size).toBe(2);
    expect(batch.catalogEvents.map((e) => (e as { event_id: string }).event_id)).toEqual(["t1", "t2"]);
  });

  it("adds nothing of a batch with one bad event", () => {
    const batch = new ProjectionBatch();
    const bad = { ...tagEvent(2, "B"), entity_version: "two" };
    expect(() => batch.add("catalog", BATCH, encodeJson({ version: 1, org_id: 1, events: [tagEvent(1, "A"), bad] }))).toThrow(PoisonMessageError);
    expect(() => batch.add("catalog", BATCH, encodeJson({ events: [tagEvent(1, "A")] }))).toThrow(PoisonMessageError);
    expect(batch.size).toBe(0);
    expect(batch.catalogEvents).toEqual([]);
  });

  it("writes a created asset's tag once: its own event first, the snapshot only for tags without one", async () => {
    const assetCreated = (id: number, tags: Array<{ id: number; value: string }>) => ({
      version: 1,
      event_id: `a${id}`,
      org_id: 1,
      entity: "asset",
      entity_id: id,
      entity_version: 1,
      verb: "created",
      occurred_at: T,
      data: {
        id, external_key: `K${id}`, name: `Asset ${id}`, description: null, is_active: true, metadata: {}, valid_from: T, valid_to: null,
        location_id: null, location_external_key: null, created_at: T, updated_at: T, deleted_at: null,
        tags: tags.map((t) => ({ id: t.id, tag_type: "rfid", value: t.value, is_active: true, valid_from: T, valid_to: null, created_at: T, updated_at: T })),
      },
    });
    const batch = new ProjectionBatch();
    // Tag 1 comes with its own event (as a create emits it); tag 2 only inside the asset's snapshot.
    batch.add("catalog", BATCH, encodeJson({ version: 1, org_id: 1, events: [assetCreated(41, [{ id: 1, value: "A" }, { id: 2, value: "B" }]), tagEvent(1, "A")] }));
    const calls: Array<[string, number[]]> = [];
    const store = new Proxy({} as ProjectionStore, {
      get: (_, name) => async (_tx: unknown, rows: Array<{ tagId?: number }>) => {
        if (name === "upsertTags" || name === "insertSnapshotTags") calls.push([name, rows.map((r) => r.tagId!)]);
        return 0;
      },
    });
    await batch.apply({} as never, store);
    expect(calls).toEqual([
      ["upsertTags", [1]],
      ["insertSnapshotTags", [2]],
    ]);
  });
});
