import { describe, expect, it } from "vitest";
import { AssetPositionBatch, encodeJson, isPositionSubject, positionEventsOf, POSITION_BATCH_ITEMS, POSITION_BATCH_MAX } from "@whereabouts/shared";
import { positionBatches, type PositionVerb } from "./position-publisher.ts";
import type { PositionState } from "./scan-store.ts";

const change = (orgId: number, assetId: number, verb: PositionVerb = "seen"): { state: PositionState; verb: PositionVerb } => ({
  state: { orgId, assetId, locationId: 7, observedAt: "2026-11-28T10:00:00.000001Z", seq: assetId, previousLocationId: verb === "seen" ? 7 : null },
  verb,
});

describe("positionBatches", () => {
  it("splits each organization's changes into messages of at most POSITION_BATCH_ITEMS, every change once and in order", () => {
    const changes = [...Array.from({ length: 1234 }, (_, i) => change(1, i + 1)), ...Array.from({ length: 3 }, (_, i) => change(2, i + 1, "moved"))];
    const batches = positionBatches(changes);
    expect(batches.map((b) => [b.batch.org_id, b.batch.positions.length])).toEqual([
      [1, POSITION_BATCH_ITEMS],
      [1, POSITION_BATCH_ITEMS],
      [1, 1234 - 2 * POSITION_BATCH_ITEMS],
      [2, 3],
    ]);
    expect(batches.flatMap((b) => b.batch.positions.map((p) => p.asset_id))).toEqual([
      ...Array.from({ length: 1234 }, (_, i) => i + 1),
      1,
      2,
      3,
    ]);
    expect(batches.map((b) => b.subject)).toEqual([
      "tracking.events.1.sightings.positions",
      "tracking.events.1.sightings.positions",
      "tracking.events.1.sightings.positions",
      "tracking.events.2.asset.positions",
    ]);
  });

  it("sends moves on asset.positions and sightings on sightings.positions, never in one message", () => {
    const changes = [change(1, 1, "moved"), change(1, 2), change(1, 3, "moved"), change(1, 4), change(2, 5)];
    const batches = positionBatches(changes);
    expect(batches.map((b) => [b.subject, b.batch.positions.map((p) => [p.asset_id, p.verb])])).toEqual([
      ["tracking.events.1.asset.positions", [[1, "moved"], [3, "moved"]]],
      ["tracking.events.1.sightings.positions", [[2, "seen"], [4, "seen"]]],
      ["tracking.events.2.sightings.positions", [[5, "seen"]]],
    ]);
    // Catalog's consumer (filter tracking.events.*.asset.*) is handed the moves only; reporting reads both.
    const catalogFilter = /^tracking\.events\.[^.]+\.asset\.[^.]+$/;
    expect(batches.filter((b) => catalogFilter.test(b.subject)).flatMap((b) => b.batch.positions.map((p) => p.verb))).toEqual(["moved", "moved"]);
    expect(batches.every((b) => isPositionSubject(b.subject))).toBe(true);
  });

  it("keeps a full message of the widest items under 128 KiB, and consumers read it back", () => {
    // Every number at its widest: ids are int4, seq a safe integer.
    const widest = Array.from({ length: POSITION_BATCH_ITEMS }, () => ({
      state: {
        orgId: 2_147_483_647,
        assetId: 2_147_483_647,
        locationId: 2_147_483_647,
        observedAt: "2026-11-28T10:00:00.123456Z",
        seq: Number.MAX_SAFE_INTEGER,
        previousLocationId: 2_147_483_646,
      },
      verb: "moved" as const,
    }));
    const [message, ...rest] = positionBatches(widest);
    expect(rest).toEqual([]);
    const data = encodeJson(message!.batch);
    expect(data.length).toBeLessThan(128 * 1024);
    expect(AssetPositionBatch.safeParse(JSON.parse(Buffer.from(data).toString("utf8"))).success).toBe(true);
    expect(positionEventsOf(message!.subject, JSON.parse(Buffer.from(data).toString("utf8")))).toHaveLength(POSITION_BATCH_ITEMS);
  });

  it("writes each change as the asset's state, its event id made of verb, organization, asset and seq", () => {
    const [message] = positionBatches([{ state: { orgId: 3, assetId: 41, locationId: 9, observedAt: "2026-11-28T10:00:00.000001Z", seq: 17, previousLocationId: 8 }, verb: "moved" }]);
    expect(message!.batch).toEqual({
      version: 1,
      org_id: 3,
      positions: [
        { event_id: "moved:3:41:17", asset_id: 41, location_id: 9, observed_at: "2026-11-28T10:00:00.000001Z", seq: 17, previous_location_id: 8, verb: "moved" },
      ],
    });
  });

  it("produces no more than consumers accept", () => {
    expect(POSITION_BATCH_ITEMS).toBeLessThanOrEqual(POSITION_BATCH_MAX);
  });
});
