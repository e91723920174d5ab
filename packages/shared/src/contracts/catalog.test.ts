import { describe, expect, it } from "vitest";
import { CatalogEvent } from "./catalog.ts";

const at = "2026-11-20T00:00:00.000Z";
const locationEvent = (data: Record<string, unknown>) => ({
  version: 1,
  event_id: "e-1",
  org_id: 1,
  entity: "location",
  entity_id: 7,
  entity_version: 1,
  verb: "created",
  occurred_at: at,
  data: {
    id: 7,
    external_key: "L-7",
    name: "Dock",
    description: null,
    is_active: true,
    parent_id: null,
    parent_external_key: null,
    valid_from: at,
    valid_to: null,
    created_at: at,
    updated_at: at,
    deleted_at: null,
    tags: [],
    ...data,
  },
});

describe("catalog location events", () => {
  it("reads an event recorded before zones existed as a plain location (not a zone, no dwell limit)", () => {
    const event = CatalogEvent.parse(locationEvent({}));
    expect(event.data).toMatchObject({ is_zone: false, max_dwell_s: null });
  });

  it("keeps the zone fields an event carries, and refuses wrong ones", () => {
    expect(CatalogEvent.parse(locationEvent({ is_zone: true, max_dwell_s: 600 })).data).toMatchObject({ is_zone: true, max_dwell_s: 600 });
    expect(CatalogEvent.safeParse(locationEvent({ is_zone: "yes" })).success).toBe(false);
    expect(CatalogEvent.safeParse(locationEvent({ max_dwell_s: -1 })).success).toBe(false);
  });
});
