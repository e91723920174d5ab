/** Catalog's resource views (the records of the spec) and its events. */
import { z } from "zod";
import { Id, Timestamp, TagType } from "./common.ts";

export const TagView = z.object({
  id: Id,
  tag_type: z.string().meta({ description: "Open enumeration: rfid, ble, barcode today" }),
  value: z.string(),
  is_active: z.boolean(),
  valid_from: Timestamp,
  valid_to: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type TagView = z.infer<typeof TagView>;

export const AssetView = z.object({
  id: Id,
  external_key: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  is_active: z.boolean(),
  metadata: z.record(z.string(), z.unknown()),
  valid_from: Timestamp,
  valid_to: Timestamp.nullable(),
  location_id: Id.nullable(),
  location_external_key: z.string().nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Timestamp.nullable(),
  tags: z.array(TagView),
});
export type AssetView = z.infer<typeof AssetView>;

export const LocationView = z.object({
  id: Id,
  external_key: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  is_active: z.boolean(),
  parent_id: Id.nullable(),
  parent_external_key: z.string().nullable(),
  valid_from: Timestamp,
  valid_to: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Timestamp.nullable(),
  tags: z.array(TagView),
});
export type LocationView = z.infer<typeof LocationView>;

export const RenameResponse = <T extends z.ZodType>(record: T) =>
  z.object({ data: record, descendant_count_affected: z.number().int() });

/* ---------------------------------------------------------------- events */

export const CATALOG_ENTITIES = ["asset", "location", "tag"] as const;
export const CatalogEntity = z.enum(CATALOG_ENTITIES);
export const CATALOG_VERBS = ["created", "updated", "renamed", "deleted", "attached", "detached"] as const;
export const CatalogVerb = z.enum(CATALOG_VERBS);

/** A tag as events carry it: its view plus its owner and soft-delete state. */
export const TagRecord = TagView.extend({
  owner_type: z.enum(["asset", "location"]),
  owner_id: Id,
  deleted_at: Timestamp.nullable(),
});
export type TagRecord = z.infer<typeof TagRecord>;

const eventBase = {
  /** Payload schema version. */
  version: z.literal(1),
  /** Unique per event; also the `Nats-Msg-Id`. */
  event_id: z.string(),
  org_id: Id,
  entity_id: Id,
  /** Per-entity counter: consumers apply an event only when it is newer. */
  entity_version: z.number().int().positive(),
  verb: CatalogVerb,
  occurred_at: Timestamp,
};

export const AssetEvent = z.object({ ...eventBase, entity: z.literal("asset"), data: AssetView });
export const LocationEvent = z.object({ ...eventBase, entity: z.literal("location"), data: LocationView });
export const TagEvent = z.object({ ...eventBase, entity: z.literal("tag"), data: TagRecord });
export const CatalogEvent = z.discriminatedUnion("entity", [AssetEvent, LocationEvent, TagEvent]);
export type CatalogEvent = z.infer<typeof CatalogEvent>;
export type AssetEvent = z.infer<typeof AssetEvent>;
export type LocationEvent = z.infer<typeof LocationEvent>;
export type TagEvent = z.infer<typeof TagEvent>;

export { TagType };
