/**
 * The report in SQL: one page and its total_count, both computed by Postgres
 * (no rows are loaded to count them), every value a bound parameter.
 *
 * Visibility (spec: Visibility rules; DECISIONS.md):
 *  - a report row is an asset known to catalog (external_key) and scanned
 *    (last_seen_at); soft-deleted only with include_deleted; the asset must be
 *    currently effective, checked against now() since time passes without writes;
 *  - the joined location: not currently effective (or unknown) -> location_id
 *    and location_external_key null; soft-deleted -> location_id kept, key null.
 *  Filters match what the row shows: location_id the location_id it displays,
 *  location_external_key the key it displays.
 *
 * Shapes chosen for the indexes (see the migration):
 *  - no q: one ordered scan (assets_report_idx for the default order);
 *  - q: two disjoint branches, "name or external_key matches" and "otherwise a
 *    live tag value matches", each planned on its own (trigram bitmap when the
 *    match is rare, an ordered walk when it is common), merged by UNION ALL;
 *  - total_count without filters: the per-organization count the triggers
 *    keep, corrected for validity windows at query time through two small
 *    partial indexes, instead of visiting every row.
 */
import type { SqlRunner } from "../reporting-db.ts";
import type { ReportQuery } from "./report-query.ts";
import {
  effectiveSql,
  escapeLike,
  sqlOffset,
  validityNotEndedSql,
  validityStartedSql,
  wireTimestampSql,
  type AssetLocationItem,
  type ReportSortField,
} from "@whereabouts/shared";

/** The partial indexes' predicate. */
const REPORT_ROW = "a.scanned AND a.external_key IS NOT NULL";
const LOCATION_EFFECTIVE = `(l.location_id IS NOT NULL AND ${effectiveSql("l")})`;
const LOCATION_ID = `CASE WHEN ${LOCATION_EFFECTIVE} THEN p.location_id END`;
const LOCATION_KEY = `CASE WHEN ${LOCATION_EFFECTIVE} AND l.deleted_at IS NULL THEN l.external_key END`;

/** Sort keys on the base row (a, l) and on a merged branch row (x). */
const SORT_KEYS: Record<ReportSortField, { row: string; merged: string }> = {
  asset_last_seen: { row: "p.last_seen_at", merged: "x.sort_last_seen" },
  asset_external_key: { row: "a.external_key", merged: "x.asset_external_key" },
  location_external_key: { row: LOCATION_KEY, merged: "x.location_external_key" },
};

interface Built {
  params: unknown[];
  bind(value: unknown): string;
  /** Conditions on `a` (and `l` when needsLocation). */
  where: string[];
  needsLocation: boolean;
  /** Disjoint q branches, when q is given. */
  branches: [string, string] | undefined;
  filtered: boolean;
}

export function createReportStore(schema = "reporting") {
  const assets = `"${schema}"."assets"`;
  const locations = `"${schema}"."locations"`;
  const tags = `"${schema}"."tags"`;
  const counts = `"${schema}"."counts"`;
  const positions = `"${schema}"."positions"`;
  // The position row drives (p.org_id = $1): the default order walks
  // positions_report_idx and fetches each asset row by its key.
  const withLocation = `${positions} p JOIN ${assets} a ON a.org_id = p.org_id AND a.asset_id = p.asset_id
    LEFT JOIN ${locations} l ON l.org_id = p.org_id AND l.location_id = p.location_id`;

  function build(orgId: number, query: ReportQuery): Built {
    const params: unknown[] = [orgId];
    const bind = (value: unknown) => `$${params.push(value)}`;
    const where = ["a.org_id = $1", REPORT_ROW, effectiveSql("a")];
    let needsLocation = false;
    if (!query.includeDeleted) where.push("a.deleted_at IS NULL");
    if (query.assetIds.length) where.push(`a.asset_id = ANY(${bind(query.assetIds)}::int[])`);
    if (query.assetExternalKeys.length) where.push(`a.external_key = ANY(${bind(query.assetExternalKeys)}::text[])`);
    if (query.locationIds.length) {
      needsLocation = true;
      where.push(`p.location_id = ANY(${bind(query.locationIds)}::int[])`, LOCATION_EFFECTIVE);
    }
    if (query.locationExternalKeys.length) {
      needsLocation = true;
      where.push(`l.external_key = ANY(${bind(query.locationExternalKeys)}::text[])`, "l.deleted_at IS NULL", LOCATION_EFFECTIVE);
    }
    let branches: Built["branches"];
    if (query.q !== undefined) {
      const pattern = `('%' || lower(${bind(escapeLike(query.q))}::text) || '%')`;
      const onAsset = `(a.name_lower LIKE ${pattern} OR a.external_key_lower LIKE ${pattern})`;
      const onTag = `EXISTS (SELECT 1 FROM ${tags} t
          WHERE t.org_id = a.org_id AND t.asset_id = a.asset_id
            AND t.deleted_at IS NULL AND t.is_active AND ${effectiveSql("t")}
            AND t.value_lower LIKE ${pattern})`;
      branches = [onAsset, `NOT ${onAsset} AND ${onTag}`];
    }
    const filtered =
      query.assetIds.length + query.assetExternalKeys.length + query.locationIds.length + query.locationExternalKeys.length > 0;
    return { params, bind, where, needsLocation, branches, filtered };
  }

  const columns = (withSortKey: boolean) =>
    `a.asset_id, a.external_key AS asset_external_key,
     ${LOCATION_ID} AS location_id, ${LOCATION_KEY} AS location_external_key,
     ${wireTimestampSql("a.deleted_at")} AS asset_deleted_at, ${wireTimestampSql("p.last_seen_at")} AS asset_last_seen
     ${withSortKey ? ", p.last_seen_at AS sort_last_seen" : ""}`;

  function orderBy(query: ReportQuery, key: "row" | "merged"): string {
    const order = query.sort.map((k) => `${SORT_KEYS[k.field][key]} ${k.descending ? "DESC" : "ASC"}`);
    // Final tiebreak: asset_id, in the direction of the first sort key.
    order.push(`${key === "row" ? "p" : "x"}.asset_id ${query.sort[0]?.descending ? "DESC" : "ASC"}`);
    return order.join(", ");
  }

  return {
    async page(db: SqlRunner, orgId: number, query: ReportQuery): Promise<AssetLocationItem[]> {
      const b = build(orgId, query);
      const offset = sqlOffset(query);
      if (!b.branches) {
        return db.$queryRawUnsafe<AssetLocationItem[]>(
          `SELECT ${columns(false)} FROM ${withLocation}
            WHERE p.org_id = $1 AND ${b.where.join(" AND ")}
            ORDER BY ${orderBy(query, "row")}
            LIMIT ${b.bind(query.limit)} OFFSET ${b.bind(offset)}::bigint`,
          ...b.params,
        );
      }
      const reach = b.bind(query.limit + offset);
      const branch = (condition: string) =>
        `(SELECT ${columns(true)} FROM ${withLocation}
           WHERE p.org_id = $1 AND ${b.where.join(" AND ")} AND ${condition}
           ORDER BY ${orderBy(query, "row")} LIMIT ${reach}::bigint)`;
      return db.$queryRawUnsafe<AssetLocationItem[]>(
        `SELECT x.asset_id, x.asset_external_key, x.location_id, x.location_external_key, x.asset_deleted_at, x.asset_last_seen
           FROM (${branch(b.branches[0])} UNION ALL ${branch(b.branches[1])}) x
          ORDER BY ${orderBy(query, "merged")}
          LIMIT ${b.bind(query.limit)} OFFSET ${b.bind(offset)}::bigint`,
        ...b.params,
      );
    },

    async count(db: SqlRunner, orgId: number, query: ReportQuery): Promise<number> {
      const b = build(orgId, query);
      const from = b.needsLocation ? withLocation : `${assets} a`;
      const where = b.where.join(" AND ");
      let sql: string;
      if (b.branches) {
        sql = `SELECT ((SELECT count(*) FROM ${from} WHERE ${where} AND ${b.branches[0]})
                     + (SELECT count(*) FROM ${from} WHERE ${where} AND ${b.branches[1]}))::int AS total`;
      } else if (!b.filtered) {
        // Same rows as `where`, without visiting them: the maintained count of
        // rows without an expiry, minus those not valid yet, plus the currently
        // valid rows that have an expiry (both through small partial indexes).
        const [open, live] = query.includeDeleted ? ["open_all", ""] : ["open_live", " AND a.deleted_at IS NULL"];
        sql = `SELECT (COALESCE((SELECT c.${open} FROM ${counts} c WHERE c.org_id = $1), 0)
                     - (SELECT count(*) FROM ${assets} a
                         WHERE a.org_id = $1 AND ${REPORT_ROW} AND a.valid_to IS NULL${live} AND NOT ${validityStartedSql("a")})
                     + (SELECT count(*) FROM ${assets} a
                         WHERE a.org_id = $1 AND ${REPORT_ROW} AND a.valid_to IS NOT NULL${live}
                           AND ${validityNotEndedSql("a")} AND ${validityStartedSql("a")}))::int AS total`;
      } else {
        sql = `SELECT count(*)::int AS total FROM ${from} WHERE ${where}`;
      }
      const rows = await db.$queryRawUnsafe<Array<{ total: number }>>(sql, ...b.params);
      return rows[0]?.total ?? 0;
    },
  };
}
export type ReportStore = ReturnType<typeof createReportStore>;
