/** Catalog's resource views (the records of the spec) and its events. */
import { z } from "zod";
import { Id, MAX_ID, Timestamp, TagType } from "./common.ts";
import { OrgSettingsRecord } from "./settings.ts";
import { ScanPointView } from "./scan-points.ts";

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
  /** EXTENSIONS.md section 5: a zone counts its whole subtree as inside (zone.entered / zone.exited). */
  is_zone: z.boolean(),
  /** asset.dwell_exceeded when an asset stays at this location (itself, not its subtree) longer; null: no limit. */
  max_dwell_s: z.number().int().min(0).max(MAX_ID).nullable(),
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

export const CATALOG_ENTITIES = ["asset", "location", "tag", "settings", "scan_point"] as const;
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
/** Events recorded before zones existed carry neither field: read them as the defaults. */
const LocationEventData = LocationView.extend({
  is_zone: LocationView.shape.is_zone.default(false),
  max_dwell_s: LocationView.shape.max_dwell_s.default(null),
});
export const LocationEvent = z.object({ ...eventBase, entity: z.literal("location"), data: LocationEventData });
export const TagEvent = z.object({ ...eventBase, entity: z.literal("tag"), data: TagRecord });
/** An organization's settings changed (entity_id is the organization). */
export const SettingsEvent = z.object({ ...eventBase, entity: z.literal("settings"), data: OrgSettingsRecord });
/** A scan point created, updated or deleted (its record as the API shows it). */
export const ScanPointEvent = z.object({ ...eventBase, entity: z.literal("scan_point"), data: ScanPointView });
export const CatalogEvent = z.discriminatedUnion("entity", [AssetEvent, LocationEvent, TagEvent, SettingsEvent, ScanPointEvent]);
export type CatalogEvent = z.infer<typeof CatalogEvent>;

/**
 * A bulk job's events in one message, on `catalog.events.<org_id>.batch.events`
 * (catalogBatchSubject): the organization's catalog events in emit order, each
 * whole (its own event_id, entity_version, subject's entity and verb in the
 * body). Consumers read it as those events, one after another, as if each had
 * come alone: partner events, webhooks and replicas see no difference. One
 * message instead of one per event (two per imported row).
 */
export const CATALOG_BATCH_ENTITY = "batch";
export const CATALOG_BATCH_VERB = "events";
/**
 * Bytes of event JSON per batch message: packEventBatches stays under it, the
 * bulk insert's own packing (recordEventBatchesSql) under 1.5 times it; far
 * under NATS' max_payload (1 MiB by default) either way.
 */
export const CATALOG_BATCH_MAX_BYTES = 128 * 1024;
/** Bytes a CATALOG consumer takes per batch (ConsumerSpec.maxBatchBytes): a few thousand events a transaction. */
export const CATALOG_CONSUMER_BATCH_BYTES = 2 * 1024 * 1024;
/**
 * Messages a CATALOG consumer pulls at once (ConsumerSpec.pullMessages). Batch
 * messages travel as packed (about CATALOG_BATCH_MAX_BYTES each) and the client
 * refills before a pull is used up: 32 keep about two batches of
 * CATALOG_CONSUMER_BATCH_BYTES ahead of the handler (128 held some 70 MiB of
 * message data during a 100,000-row import, for no gain in speed).
 */
export const CATALOG_CONSUMER_PULL = 32;
export const CatalogEventBatch = z.object({
  version: z.literal(1),
  org_id: Id,
  events: z.array(z.unknown()).min(1),
});
export type CatalogEventBatch = z.infer<typeof CatalogEventBatch>;

/** Whether a CATALOG subject (in the contracts' terms) carries a batch. */
export const isCatalogBatchSubject = (subject: string) => subject.endsWith(`.${CATALOG_BATCH_ENTITY}.${CATALOG_BATCH_VERB}`);

/**
 * A CATALOG message as its events, unparsed (each consumer checks them with
 * its own schema): the batch's events, or the message itself. Undefined for a
 * batch that is not one (poison), or one whose events name another organization.
 */
export function catalogEventsOf(subject: string, json: unknown): unknown[] | undefined {
  if (!isCatalogBatchSubject(subject)) return [json];
  const parsed = CatalogEventBatch.safeParse(json);
  if (!parsed.success) return undefined;
  const orgId = parsed.data.org_id;
  for (const event of parsed.data.events) if ((event as { org_id?: unknown } | null)?.org_id !== orgId) return undefined;
  return parsed.data.events;
}
export type AssetEvent = z.infer<typeof AssetEvent>;
export type LocationEvent = z.infer<typeof LocationEvent>;
export type TagEvent = z.infer<typeof TagEvent>;
export type SettingsEvent = z.infer<typeof SettingsEvent>;
export type ScanPointEvent = z.infer<typeof ScanPointEvent>;

export { TagType };

/** A row error of a bulk upload (EXTENSIONS.md section 3): row counts data rows from 1. */
export const JobRowError = z.object({ row: z.number().int(), field: z.string(), code: z.string(), message: z.string() }).meta({ id: "JobRowError" });

/** GET /api/v1/jobs/<id>: a background job and its progress. */
export const JobView = z
  .object({
    id: Id,
    kind: z.literal("assets.bulk"),
    status: z.enum(["queued", "running", "succeeded", "failed"]),
    rows_total: z.number().int().nullable().meta({ description: "Known once the file has been read through" }),
    rows_done: z.number().int(),
    created: z.number().int(),
    updated: z.number().int(),
    unchanged: z.number().int(),
    failed_rows: z.number().int(),
    errors: z.array(JobRowError).max(1000),
    created_at: Timestamp,
    started_at: Timestamp.nullable(),
    finished_at: Timestamp.nullable(),
  })
  .meta({ id: "JobView" });
export type JobView = z.infer<typeof JobView>;

/** The parts of POST /api/v1/assets/bulk (multipart/form-data). */
export const AssetBulkUpload = z
  .object({
    file: z.string().meta({ format: "binary", description: "UTF-8 CSV with a header row: external_key, name, description, is_active, valid_from, valid_to, metadata, tags" }),
    mode: z.enum(["upsert", "create"]).optional(),
    on_error: z.enum(["abort", "skip"]).optional(),
  })
  .meta({ id: "AssetBulkUpload" });
