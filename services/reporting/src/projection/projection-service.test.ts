import { describe, expect, it } from "vitest";
import { encodeJson } from "@whereabouts/shared";
import { PoisonMessageError, ProjectionBatch } from "./projection-service.ts";

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
});
