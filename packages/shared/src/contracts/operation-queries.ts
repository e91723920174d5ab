/**
 * The query parameters of the public list operations, as zod schemas of each
 * key's value domain (what the OpenAPI document shows). On the wire every
 * value is a string, repeated keys meaning "any of"; the owning service reads
 * them with `QueryReader`, which gives the spec's field errors.
 */
import { z } from "zod";
import { Id, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, MAX_ID } from "./common.ts";
import { externalKey } from "../rules/external-key.ts";
import { PARTNER_EVENT_TYPES } from "./partner-events.ts";
import { SCAN_POINT_SOURCE_MAX, SCAN_POINT_SOURCE_PATTERN } from "./scan-points.ts";
import { OFFSET_MAX, Q_MAX_LENGTH } from "../limits.ts";

/** A numeric id, in a path or a query (int64 for clients, 1..2^31-1 in fact). */
export const IdParam = Id.meta({ format: "int64" });

const key = externalKey("key");
const instant = z.string().meta({ format: "date-time" });
/** A key that may be repeated: any of its values. */
const anyOf = <T extends z.ZodType>(item: T, description: string) => z.array(item).optional().describe(description);
const one = <T extends z.ZodType>(schema: T, description: string) => schema.optional().describe(description);

export const PAGE_QUERY = {
  limit: z.number().int().min(1).max(LIST_LIMIT_MAX).default(LIST_LIMIT_DEFAULT).describe(`Page size (at most ${LIST_LIMIT_MAX})`),
  offset: z.number().int().min(0).max(OFFSET_MAX).default(0).describe("Rows to skip"),
};

const sort = (fields: readonly string[], fallback: string) =>
  one(z.string(), `Comma-separated fields, '-' prefix for descending. Fields: ${fields.join(", ")}. Default: ${fallback}`);
const includeDeleted = z.boolean().default(false).describe("Include soft-deleted rows");
const isActive = one(z.boolean(), "Filter on is_active");
const q = (what: string) => one(z.string().max(Q_MAX_LENGTH), `Case-insensitive substring match on ${what} and active, currently effective tag values`);
const ids = (what: string, exclusiveWith?: string) =>
  anyOf(IdParam, `Any of these ${what}${exclusiveWith ? `; exclusive with ${exclusiveWith}` : ""}`);
const keys = (what: string, exclusiveWith: string) => anyOf(key, `Any of these ${what}; exclusive with ${exclusiveWith}`);
const externalKeys = anyOf(key, "Any of these keys (repeat the parameter)");

export const AssetListQuery = z.object({
  external_key: externalKeys,
  location_id: ids("locations", "location_external_key"),
  location_external_key: keys("location keys", "location_id"),
  is_active: isActive,
  include_deleted: includeDeleted,
  q: q("name, external_key, description"),
  ...PAGE_QUERY,
  sort: sort(["external_key", "name", "created_at", "updated_at"], "external_key, then id"),
});

export const LocationListQuery = z.object({
  external_key: externalKeys,
  parent_id: anyOf(IdParam, "Children of any of these locations; exclusive with parent_external_key"),
  parent_external_key: anyOf(key, "Children of any of these location keys; exclusive with parent_id"),
  is_active: isActive,
  is_zone: one(z.boolean(), "Filter on is_zone"),
  include_deleted: includeDeleted,
  q: q("name, external_key, description"),
  ...PAGE_QUERY,
  sort: sort(["external_key", "name", "created_at"], "external_key, then id"),
});

export const PageQuery = z.object(PAGE_QUERY);

export const HistoryListQuery = z.object({
  from: one(instant, "Observation window start (inclusive), RFC 3339"),
  to: one(instant, "Observation window end (exclusive), RFC 3339"),
  ...PAGE_QUERY,
  sort: sort(["event_observed_at"], "-event_observed_at"),
});

export const EventFeedQuery = z.object({
  after: one(z.string(), "A next_cursor of this feed: events after it (default: the oldest kept)"),
  type: anyOf(z.enum(PARTNER_EVENT_TYPES), "Any of these event types (repeat the parameter)"),
  limit: PAGE_QUERY.limit,
});

export const WebhookDeliveriesQuery = z.object({
  state: anyOf(z.enum(["pending", "delivered", "failed"]), "Any of these states"),
  event_id: anyOf(z.string(), "Any of these events"),
  ...PAGE_QUERY,
});

export const WebhookReplayQuery = z.object({
  from: instant.describe("Events that occurred at or after this instant (RFC 3339)"),
  to: one(instant, "Events that occurred before this instant (RFC 3339); default: now"),
});

export const ScanPointListQuery = z.object({
  source: anyOf(z.string().min(1).max(SCAN_POINT_SOURCE_MAX).regex(SCAN_POINT_SOURCE_PATTERN), "Any of these sources (repeat the parameter)"),
  antenna: anyOf(z.number().int().min(0).max(MAX_ID), "Any of these antennas"),
  location_id: ids("locations", "location_external_key"),
  location_external_key: keys("location keys", "location_id"),
  include_deleted: includeDeleted,
  ...PAGE_QUERY,
  sort: sort(["source", "created_at", "updated_at"], "source (a source's default mapping, antenna null, first), then antenna, then id"),
});

export const AssetLocationsQuery = z.object({
  location_id: ids("locations", "location_external_key"),
  location_external_key: keys("location keys", "location_id"),
  asset_id: ids("assets", "asset_external_key"),
  asset_external_key: keys("asset keys", "asset_id"),
  include_deleted: includeDeleted,
  q: q("asset name, asset external_key"),
  ...PAGE_QUERY,
  sort: sort(["asset_last_seen", "asset_external_key", "location_external_key"], "-asset_last_seen"),
});

/** No query parameters. */
export const NoQuery = z.object({});
