/**
 * What reporting reads from the CATALOG and TRACKING streams: the shared event
 * contracts narrowed to the fields the read model keeps, with instants checked
 * (a bad timestamp must fail here, at the boundary, never inside SQL).
 */
import { z } from "zod";
import { AssetPositionEvent, AssetView, LocationView, OrgSettingsRecord, parseRfc3339, TagRecord, TagView } from "@whereabouts/shared";

/** The instants reporting accepts (the Instant schema's rule, also checked on its own where a message was already parsed). */
export const isReportingInstant = (text: string): boolean => parseRfc3339(text) !== null;
export const Instant = z.string().refine(isReportingInstant, "must be an RFC 3339 timestamp");

const eventBase = {
  version: z.literal(1),
  event_id: z.string(),
  org_id: AssetPositionEvent.shape.org_id,
  entity_id: AssetPositionEvent.shape.asset_id,
  entity_version: z.number().int().positive().max(2147483647),
  occurred_at: Instant,
};

const SnapshotTag = TagView.pick({ id: true, tag_type: true, value: true, is_active: true }).extend({
  valid_from: Instant,
  valid_to: Instant.nullable(),
});

export const ReportingAssetEvent = z.object({
  ...eventBase,
  entity: z.literal("asset"),
  data: AssetView.pick({ id: true, external_key: true, name: true }).extend({
    valid_from: Instant,
    valid_to: Instant.nullable(),
    deleted_at: Instant.nullable(),
    /** Active, currently-effective tags at the time of the event (used only for tags reporting has not heard of). */
    tags: z.array(SnapshotTag).optional(),
  }),
});

export const ReportingLocationEvent = z.object({
  ...eventBase,
  entity: z.literal("location"),
  data: LocationView.pick({ id: true, external_key: true, parent_id: true }).extend({
    valid_from: Instant,
    valid_to: Instant.nullable(),
    deleted_at: Instant.nullable(),
    // Optional: events recorded before zones existed lack them (the defaults then).
    parent_id: LocationView.shape.parent_id.optional(),
    is_zone: LocationView.shape.is_zone.optional(),
    max_dwell_s: LocationView.shape.max_dwell_s.optional(),
  }),
});

/** The organization's settings (alerts read zone_min_stay_s and missing_after_s). */
export const ReportingSettingsEvent = z.object({
  ...eventBase,
  entity: z.literal("settings"),
  data: OrgSettingsRecord.pick({ id: true, zone_min_stay_s: true, missing_after_s: true }),
});

export const ReportingTagEvent = z.object({
  ...eventBase,
  entity: z.literal("tag"),
  verb: z.string(),
  data: TagRecord.pick({ id: true, tag_type: true, value: true, is_active: true, owner_type: true, owner_id: true }).extend({
    valid_from: Instant,
    valid_to: Instant.nullable(),
    deleted_at: Instant.nullable(),
  }),
});

export const ReportingCatalogEvent = z.discriminatedUnion("entity", [
  ReportingAssetEvent,
  ReportingLocationEvent,
  ReportingTagEvent,
  ReportingSettingsEvent,
]);
export type ReportingCatalogEvent = z.infer<typeof ReportingCatalogEvent>;

export const ReportingPositionEvent = AssetPositionEvent.extend({ observed_at: Instant });
export type ReportingPositionEvent = z.infer<typeof ReportingPositionEvent>;

/* ------------------------------------------------------------- rows */

export interface AssetRow {
  orgId: number;
  assetId: number;
  version: number;
  externalKey: string;
  name: string;
  validFrom: string;
  validTo: string | null;
  deletedAt: string | null;
}

export interface LocationRow {
  orgId: number;
  locationId: number;
  version: number;
  externalKey: string;
  /** The tree: zones count their subtree, and the location summary rolls it up. */
  parentId: number | null;
  validFrom: string;
  validTo: string | null;
  deletedAt: string | null;
  isZone: boolean;
  maxDwellS: number | null;
}

export interface SettingsRow {
  orgId: number;
  version: number;
  zoneMinStayS: number;
  missingAfterS: number;
}

export interface TagRow {
  orgId: number;
  tagId: number;
  /** The tag's entity_version; for a tag seen only inside an asset event, that asset event's version. */
  version: number;
  assetId: number;
  tagType: string;
  value: string;
  isActive: boolean;
  validFrom: string;
  validTo: string | null;
  deletedAt: string | null;
}

export interface PositionRow {
  orgId: number;
  assetId: number;
  locationId: number;
  observedAt: string;
  /** observed_at in epoch microseconds, for ordering in memory. */
  observedMicros: number;
  seq: number;
  /**
   * When the asset came to this location, as far as the batch shows: the
   * first of its trailing run of events here. `continues`: every event of the
   * batch was here, so a stored row at the same location keeps its arrival.
   */
  arrivedAt: string;
  continues: boolean;
}
