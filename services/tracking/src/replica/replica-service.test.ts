import { describe, expect, it } from "vitest";
import { encodeJson, type CatalogEvent } from "@whereabouts/shared";
import { testLocationView } from "@whereabouts/shared/testing";
import { InvalidCatalogEvent, parseCatalogMessage, parseCatalogMessages, toReplicaChanges } from "./replica-service.ts";

const T = "2026-01-01T00:00:00.000Z";
const tagView = { id: 9, tag_type: "rfid", value: "V", is_active: true, valid_from: T, valid_to: null, created_at: T, updated_at: T };
const location = (version: number, key: string): CatalogEvent => ({
  version: 1,
  event_id: `l${version}`,
  org_id: 1,
  entity: "location",
  entity_id: 5,
  entity_version: version,
  verb: "updated",
  occurred_at: T,
  data: {
    ...testLocationView({ id: 5, external_key: key, name: "n", valid_from: "2026-01-01T01:00:00+01:00" }, T),
    tags: [{ ...tagView, id: 8, tag_type: "ble" }],
  },
});

describe("toReplicaChanges", () => {
  it("keeps the newest version of each entity and normalizes instants to UTC", () => {
    const changes = toReplicaChanges([
      { event: location(3, "NEW"), streamSeq: 10 },
      { event: location(2, "OLD"), streamSeq: 11 },
    ]);
    expect(changes.locations).toEqual([
      { org_id: 1, id: 5, external_key: "NEW", valid_from: "2026-01-01T00:00:00.000000Z", valid_to: null, deleted_at: null, version: 3 },
    ]);
    expect(changes.orgIds).toEqual([1]);
    expect(changes.streamSeq).toBe(11);
    expect(changes.embeddedTags).toMatchObject([{ id: 8, owner_type: "location", owner_id: 5, version: 0 }]);
  });

  it("lets a tag event win over the same tag embedded in its owner's event", () => {
    const tag: CatalogEvent = {
      version: 1,
      event_id: "t",
      org_id: 1,
      entity: "tag",
      entity_id: 8,
      entity_version: 2,
      verb: "detached",
      occurred_at: T,
      data: { ...tagView, id: 8, owner_type: "location", owner_id: 5, deleted_at: T },
    };
    const changes = toReplicaChanges([
      { event: location(1, "K"), streamSeq: 1 },
      { event: tag, streamSeq: 2 },
    ]);
    expect(changes.embeddedTags).toEqual([]);
    expect(changes.tags).toMatchObject([{ id: 8, deleted_at: "2026-01-01T00:00:00.000000Z", version: 2 }]);
  });

  it("treats a bad instant as poison", () => {
    const bad = location(1, "K");
    (bad.data as { valid_from: string }).valid_from = "soon";
    expect(() => toReplicaChanges([{ event: bad, streamSeq: 1 }])).toThrow(InvalidCatalogEvent);
  });
});

describe("parseCatalogMessage", () => {
  it("refuses what is not a catalog event", () => {
    expect(() => parseCatalogMessage(new TextEncoder().encode("{"))).toThrow(InvalidCatalogEvent);
    expect(() => parseCatalogMessage(encodeJson({ entity: "asset" }))).toThrow(InvalidCatalogEvent);
    expect(parseCatalogMessage(encodeJson(location(1, "K"))).entity).toBe("location");
  });
});

describe("parseCatalogMessages", () => {
  const BATCH = "catalog.events.1.batch.events";
  it("reads a bulk job's batch message as its events, in order", () => {
    const events = parseCatalogMessages(BATCH, encodeJson({ version: 1, org_id: 1, events: [location(1, "A"), location(2, "B")] }));
    expect(events.map((e) => [e.entity, e.entity_version])).toEqual([
      ["location", 1],
      ["location", 2],
    ]);
    expect(toReplicaChanges(events.map((event) => ({ event, streamSeq: 7 }))).locations).toMatchObject([{ external_key: "B", version: 2 }]);
  });

  it("makes the whole batch poison when one event is bad, or one names another organization", () => {
    expect(() => parseCatalogMessages(BATCH, encodeJson({ version: 1, org_id: 1, events: [location(1, "A"), { entity: "asset" }] }))).toThrow(InvalidCatalogEvent);
    expect(() => parseCatalogMessages(BATCH, encodeJson({ version: 1, org_id: 2, events: [location(1, "A")] }))).toThrow(InvalidCatalogEvent);
    expect(() => parseCatalogMessages(BATCH, encodeJson({ version: 1, org_id: 1, events: [] }))).toThrow(InvalidCatalogEvent);
    // A single event is never read as a batch, whatever it holds.
    expect(parseCatalogMessages("catalog.events.1.location.updated", encodeJson(location(3, "C")))).toHaveLength(1);
  });
});
