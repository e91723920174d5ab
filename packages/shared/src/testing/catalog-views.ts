/**
 * Contract-valid catalog views and event heads with test defaults, for the
 * fixtures that publish catalog events in catalog's place (tracking's and
 * reporting's): one builder per record, so the fixtures only name the facts
 * a test cares about.
 */
import { randomUUID } from "node:crypto";
import type { AssetView, CatalogEvent, LocationView, TagRecord, TagView } from "../contracts/catalog.ts";
import { toWireTimestamp } from "../rules/instant.ts";

/** The facts of a validity window; absent ones take the defaults. */
interface Validity {
  valid_from?: string | undefined;
  valid_to?: string | null | undefined;
  deleted_at?: string | null | undefined;
}

export function testTagView(f: { id: number; value: string; tag_type?: string | undefined; is_active?: boolean | undefined } & Validity, at: string): TagView {
  return {
    id: f.id,
    // Any text, so a test can send a bad one: the fixtures parse every event against the contract before publishing.
    tag_type: (f.tag_type ?? "rfid") as TagView["tag_type"],
    value: f.value,
    is_active: f.is_active ?? true,
    valid_from: f.valid_from ?? at,
    valid_to: f.valid_to ?? null,
    created_at: at,
    updated_at: at,
  };
}

export function testTagRecord(
  f: Parameters<typeof testTagView>[0] & { owner_type: "asset" | "location"; owner_id: number },
  at: string,
): TagRecord {
  return { ...testTagView(f, at), owner_type: f.owner_type, owner_id: f.owner_id, deleted_at: f.deleted_at ?? null };
}

export function testLocationView(f: { id: number; external_key: string; name?: string } & Validity, at: string): LocationView {
  return {
    id: f.id,
    external_key: f.external_key,
    name: f.name ?? f.external_key,
    description: null,
    is_active: true,
    parent_id: null,
    parent_external_key: null,
    is_zone: false,
    max_dwell_s: null,
    valid_from: f.valid_from ?? at,
    valid_to: f.valid_to ?? null,
    created_at: at,
    updated_at: at,
    deleted_at: f.deleted_at ?? null,
    tags: [],
  };
}

export function testAssetView(f: { id: number; external_key: string; name?: string; tags?: TagView[] } & Validity, at: string): AssetView {
  return {
    id: f.id,
    external_key: f.external_key,
    name: f.name ?? `Asset ${f.id}`,
    description: null,
    is_active: true,
    metadata: {},
    valid_from: f.valid_from ?? at,
    valid_to: f.valid_to ?? null,
    location_id: null,
    location_external_key: null,
    created_at: at,
    updated_at: at,
    deleted_at: f.deleted_at ?? null,
    tags: f.tags ?? [],
  };
}

/** Everything of a catalog event but its entity and data. */
export const testCatalogEventHead = (orgId: number, entityId: number, entityVersion: number, verb: CatalogEvent["verb"], eventId: string = randomUUID()) => ({
  version: 1 as const,
  event_id: eventId,
  org_id: orgId,
  entity_id: entityId,
  entity_version: entityVersion,
  verb,
  occurred_at: toWireTimestamp(new Date()),
});
