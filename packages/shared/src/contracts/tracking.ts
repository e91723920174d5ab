/** Tracking's wire shapes: the scan payload, history rows, position events. */
import { z } from "zod";
import { Id, Timestamp } from "./common.ts";

/** RFC 3339 date-time with any offset and 0..9 fractional digits. */
export const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

export const ScanLocation = z.union([
  z.object({ external_key: z.string().min(1).max(255) }).strict(),
  z.object({ id: Id }).strict(),
  z.object({ tag_type: z.string().min(1), value: z.string().min(1).max(255) }).strict(),
]);

export const ScanTag = z.object({ tag_type: z.string().min(1), value: z.string().min(1).max(255) }).strict();

/** Scan event, as reader integrations publish it on `scans.<org_id>.<source>`. */
export const ScanEvent = z
  .object({
    event_id: z.string().min(1).max(255).optional(),
    observed_at: z.string().regex(RFC3339, "observed_at must be an RFC 3339 timestamp"),
    location: ScanLocation,
    tags: z.array(ScanTag).min(1).max(1000),
  })
  .strict();
export type ScanEvent = z.infer<typeof ScanEvent>;

export const AssetHistoryItem = z.object({
  event_observed_at: Timestamp,
  location_id: Id.nullable(),
  location_external_key: z.string().nullable(),
  duration_seconds: z.number().int().nullable(),
});
export type AssetHistoryItem = z.infer<typeof AssetHistoryItem>;

/**
 * Published on `tracking.events.<org_id>.asset.moved` when an asset's position
 * changes, and `.asset.seen` when only its last-seen time advances. Ordered per
 * asset by (observed_at, seq): consumers apply only what is newer.
 */
export const AssetPositionEvent = z.object({
  version: z.literal(1),
  event_id: z.string(),
  org_id: Id,
  asset_id: Id,
  location_id: Id,
  observed_at: Timestamp,
  /** Tracking's ingestion sequence of the scan: breaks ties on observed_at. */
  seq: z.number().int().nonnegative(),
});
export type AssetPositionEvent = z.infer<typeof AssetPositionEvent>;
