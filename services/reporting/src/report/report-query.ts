/**
 * GET /api/v1/reports/asset-locations: the query string, checked against the
 * spec (filter rules, external_key rules, list parameters). Every problem is
 * collected so one 400 lists them all.
 */
import { exclusivePair, QueryReader, readKeyFilter, REPORT_SORT_FIELDS, type ReportSortField, type SortKey } from "@whereabouts/shared";

export interface ReportQuery {
  assetIds: number[];
  assetExternalKeys: string[];
  locationIds: number[];
  locationExternalKeys: string[];
  includeDeleted: boolean;
  /** undefined or the raw substring (case-insensitive match). */
  q: string | undefined;
  sort: SortKey<ReportSortField>[];
  limit: number;
  offset: number;
}

export const DEFAULT_REPORT_SORT: SortKey<ReportSortField>[] = [{ field: "asset_last_seen", descending: true }];

export function parseReportQuery(query: Record<string, string[]>): ReportQuery {
  const reader = new QueryReader(query);
  exclusivePair(reader, "location_id", "location_external_key");
  exclusivePair(reader, "asset_id", "asset_external_key");
  const locationIds = reader.ids("location_id");
  const locationExternalKeys = readKeyFilter(reader, "location_external_key");
  const assetIds = reader.ids("asset_id");
  const assetExternalKeys = readKeyFilter(reader, "asset_external_key");
  const includeDeleted = reader.bool("include_deleted") ?? false;
  const q = reader.search("q");
  const sort = reader.sort(REPORT_SORT_FIELDS, DEFAULT_REPORT_SORT);
  const { limit, offset } = reader.page();
  reader.finish();
  return {
    assetIds,
    assetExternalKeys,
    locationIds,
    locationExternalKeys,
    includeDeleted,
    q,
    sort,
    limit,
    offset,
  };
}
