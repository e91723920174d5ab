/** Reporting's wire shapes: the asset-locations report row, its list and its query. */
import { z } from "zod";
import { Id, ListEnvelope, Timestamp } from "./common.ts";

/** RPC operation the gateway forwards GET /api/v1/reports/asset-locations to. */
export const REPORT_ASSET_LOCATIONS_OPERATION = "report.asset_locations";

/**
 * One row per scanned asset. Every field is always present. location_id and
 * location_external_key are both null when the asset's location is not
 * currently effective; location_external_key alone is null when the location
 * is soft-deleted (the spec's exception to the pair invariant).
 */
export const AssetLocationItem = z.object({
  asset_id: Id,
  asset_external_key: z.string(),
  location_id: Id.nullable(),
  location_external_key: z.string().nullable().meta({ description: "null also when the location is soft-deleted" }),
  asset_deleted_at: Timestamp.nullable(),
  asset_last_seen: Timestamp.meta({ description: "time of the asset's most recent scan" }),
});
export type AssetLocationItem = z.infer<typeof AssetLocationItem>;

export const AssetLocationList = ListEnvelope(AssetLocationItem);
export type AssetLocationList = z.infer<typeof AssetLocationList>;

export const REPORT_SORT_FIELDS = ["asset_last_seen", "asset_external_key", "location_external_key"] as const;
export type ReportSortField = (typeof REPORT_SORT_FIELDS)[number];

