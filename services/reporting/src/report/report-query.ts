/**
 * GET /api/v1/reports/asset-locations: the query string, checked against the
 * spec (filter rules, external_key rules, list parameters). Every problem is
 * collected so one 400 lists them all.
 */
import { QueryReader, REPORT_SORT_FIELDS, type ReportSortField, type SortKey } from "@whereabouts/shared";

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

const EXTERNAL_KEY_PATTERN = /^[A-Za-z0-9-]+$/;
const EXTERNAL_KEY_MAX = 255;

/** external_key rules (spec: Identifiers) applied to each value of a repeatable filter. */
function externalKeys(reader: QueryReader, name: string): string[] {
  const out: string[] = [];
  for (const value of reader.many(name)) {
    if (value.trim() === "") {
      reader.fail(name, "too_short", `${name} must be at least 1 character`, { min_length: 1 });
    } else if (value.length > EXTERNAL_KEY_MAX) {
      reader.fail(name, "too_long", `${name} must be at most ${EXTERNAL_KEY_MAX} characters`, {
        max_length: EXTERNAL_KEY_MAX,
      });
    } else if (!EXTERNAL_KEY_PATTERN.test(value)) {
      reader.fail(name, "invalid_value", `${name} may contain only ASCII letters, digits and hyphens`, {
        pattern: EXTERNAL_KEY_PATTERN.source,
      });
    } else {
      out.push(value);
    }
  }
  return out;
}

/** Both forms of one paired reference: one ambiguous_fields entry per parameter. */
function exclusivePair(reader: QueryReader, idName: string, keyName: string): void {
  if (!reader.has(idName) || !reader.has(keyName)) return;
  for (const name of [idName, keyName]) {
    const other = name === idName ? keyName : idName;
    reader.fail(name, "ambiguous_fields", `${name} and ${other} are mutually exclusive; send only one`, {
      conflicts_with: other,
    });
  }
}

export function parseReportQuery(query: Record<string, string[]>): ReportQuery {
  const reader = new QueryReader(query);
  exclusivePair(reader, "location_id", "location_external_key");
  exclusivePair(reader, "asset_id", "asset_external_key");
  const locationIds = reader.ids("location_id");
  const locationExternalKeys = externalKeys(reader, "location_external_key");
  const assetIds = reader.ids("asset_id");
  const assetExternalKeys = externalKeys(reader, "asset_external_key");
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
