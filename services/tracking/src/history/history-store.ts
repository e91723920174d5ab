/**
 * The history page. duration_seconds is computed by LAG over the asset's
 * history in observed_key order (observed_at, then ingestion). Only the page
 * rows need it, and the predecessor of every page row except the oldest is on
 * the page itself, so the window runs over the page plus that one predecessor,
 * looked up in the asset's whole history (not the from/to window): the same
 * values as a LAG over all of it, at the cost of the page instead of the
 * history. total_count comes from the same statement (one snapshot).
 *
 * observed_key = (µs since the Unix epoch) * 16 + tie; `>> 4` gives the µs.
 */
import { effectiveSql, epochMicrosSql, sqlOffset } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";

export interface HistoryPageQuery {
  orgId: number;
  assetId: number;
  /** Inclusive lower bound, UTC with microseconds. */
  from?: string;
  /** Exclusive upper bound, UTC with microseconds. */
  to?: string;
  descending: boolean;
  limit: number;
  offset: number;
}

export interface HistoryRow {
  observed_at: Date;
  location_id: number | null;
  location_external_key: string | null;
  duration_seconds: bigint | null;
}

export interface HistoryPage {
  rows: HistoryRow[];
  total: number;
}

/** SQL: an instant parameter as its first observed_key. */
const keyOf = (param: string) => `${epochMicrosSql(`${param}::timestamptz`)} * 16`;

/** The page and total_count, from one statement. */
export async function historyPage(db: Db, q: HistoryPageQuery): Promise<HistoryPage> {
  const params: unknown[] = [q.orgId, q.assetId];
  const where = ["org_id = $1", "asset_id = $2"];
  if (q.from !== undefined) {
    params.push(q.from);
    where.push(`observed_key >= ${keyOf(`$${params.length}`)}`);
  }
  if (q.to !== undefined) {
    params.push(q.to);
    where.push(`observed_key < ${keyOf(`$${params.length}`)}`);
  }
  params.push(q.limit, sqlOffset(q));
  const dir = q.descending ? "DESC" : "ASC";
  // The whole history's count is kept on the position row (history_count:
  // raised by the rows each batch writes, in the same transaction, lowered by
  // retention with the rows it removes), so the default page costs the same
  // at 10,000 or 1,000,000 rows; a from/to window is counted over the window.
  const whole = q.from === undefined && q.to === undefined;
  const total = whole
    ? `SELECT COALESCE((SELECT history_count FROM tracking.positions WHERE org_id = $1 AND asset_id = $2), 0)::bigint AS n`
    : `SELECT count(*) AS n FROM tracking.history WHERE ${where.join(" AND ")}`;
  const rows = await query<HistoryRow & { total: bigint; observed_key: bigint | null }>(
    db,
    `WITH total AS (
       ${total}
     ), page AS (
       SELECT observed_key, location_id FROM tracking.history
        WHERE ${where.join(" AND ")}
        ORDER BY observed_key ${dir}
        LIMIT $${params.length - 1} OFFSET $${params.length}
     ), previous AS (
       -- The row before the page; past what retention removed, the newest removed row (history_floors).
       SELECT observed_key FROM (
         (SELECT p.observed_key FROM tracking.history p
           WHERE p.org_id = $1 AND p.asset_id = $2 AND p.observed_key < (SELECT min(observed_key) FROM page)
           ORDER BY p.observed_key DESC LIMIT 1)
         UNION ALL
         SELECT f.observed_key FROM tracking.history_floors f
          WHERE f.org_id = $1 AND f.asset_id = $2 AND f.observed_key < (SELECT min(observed_key) FROM page)
       ) candidates ORDER BY observed_key DESC LIMIT 1
     ), timed AS (
       SELECT observed_key, location_id, on_page,
              (observed_key >> 4) - (lag(observed_key) OVER (ORDER BY observed_key) >> 4) AS gap_us
         FROM (SELECT observed_key, location_id, true AS on_page FROM page
               UNION ALL
               SELECT observed_key, NULL, false FROM previous) w
     ), shown AS (
       SELECT t.observed_key,
              date_trunc('milliseconds', timestamptz 'epoch'
                + ((t.observed_key >> 4) / 1000000) * interval '1 second'
                + ((t.observed_key >> 4) % 1000000) * interval '1 microsecond') AS observed_at,
              CASE WHEN l.id IS NOT NULL AND ${effectiveSql("l")}
                   THEN l.id END AS location_id,
              CASE WHEN l.id IS NOT NULL AND ${effectiveSql("l")}
                   THEN l.external_key END AS location_external_key,
              t.gap_us / 1000000 AS duration_seconds
         FROM timed t
         LEFT JOIN tracking.locations l ON l.org_id = $1 AND l.id = t.location_id
        WHERE t.on_page
     )
     SELECT total.n AS total, s.observed_key, s.observed_at, s.location_id, s.location_external_key, s.duration_seconds
       FROM total LEFT JOIN shown s ON true
      ORDER BY s.observed_key ${dir}`,
    params,
  );
  return {
    total: Number(rows[0]?.total ?? 0),
    rows: rows.filter((r) => r.observed_key !== null),
  };
}
