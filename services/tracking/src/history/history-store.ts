/**
 * The history page. duration_seconds is computed by LAG over the asset's
 * history in (observed_at, seq) order. Only the page rows need it, and the
 * predecessor of every page row except the oldest is on the page itself, so
 * the window runs over the page plus that one predecessor, looked up in the
 * asset's whole history (not the from/to window): the same values as a LAG
 * over all of it, at the cost of the page instead of the history.
 * total_count is an index-only count over the same range.
 */
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

/** The page and total_count, from one statement (one snapshot). */
export async function historyPage(db: Db, q: HistoryPageQuery): Promise<HistoryPage> {
  const params: unknown[] = [q.orgId, q.assetId];
  const where = ["org_id = $1", "asset_id = $2"];
  if (q.from !== undefined) {
    params.push(q.from);
    where.push(`observed_at >= $${params.length}::timestamptz`);
  }
  if (q.to !== undefined) {
    params.push(q.to);
    where.push(`observed_at < $${params.length}::timestamptz`);
  }
  params.push(q.limit, q.offset);
  const dir = q.descending ? "DESC" : "ASC";
  const rows = await query<HistoryRow & { total: bigint; seq: number | null }>(
    db,
    `WITH total AS (
       SELECT count(*) AS n FROM tracking.history WHERE ${where.join(" AND ")}
     ), page AS (
       SELECT observed_at, seq, location_id FROM tracking.history
        WHERE ${where.join(" AND ")}
        ORDER BY observed_at ${dir}, seq ${dir}
        LIMIT $${params.length - 1} OFFSET $${params.length}
     ), oldest AS (
       SELECT observed_at, seq FROM page ORDER BY observed_at, seq LIMIT 1
     ), previous AS (
       SELECT h.observed_at, h.seq FROM oldest o
        CROSS JOIN LATERAL (
          SELECT p.observed_at, p.seq FROM tracking.history p
           WHERE p.org_id = $1 AND p.asset_id = $2 AND p.observed_at <= o.observed_at
             AND (p.observed_at, p.seq) < (o.observed_at, o.seq)
           ORDER BY p.observed_at DESC, p.seq DESC LIMIT 1
        ) h
     ), timed AS (
       SELECT observed_at, seq, location_id, on_page,
              observed_at - lag(observed_at) OVER (ORDER BY observed_at, seq) AS gap
         FROM (SELECT observed_at, seq, location_id, true AS on_page FROM page
               UNION ALL
               SELECT observed_at, seq, NULL, false FROM previous) w
     ), shown AS (
       SELECT t.observed_at AS at, t.seq,
              date_trunc('milliseconds', t.observed_at) AS observed_at,
              CASE WHEN l.id IS NOT NULL AND l.valid_from <= now() AND (l.valid_to IS NULL OR l.valid_to > now())
                   THEN l.id END AS location_id,
              CASE WHEN l.id IS NOT NULL AND l.valid_from <= now() AND (l.valid_to IS NULL OR l.valid_to > now())
                   THEN l.external_key END AS location_external_key,
              floor(extract(epoch FROM t.gap))::bigint AS duration_seconds
         FROM timed t
         LEFT JOIN tracking.locations l ON l.org_id = $1 AND l.id = t.location_id
        WHERE t.on_page
     )
     SELECT total.n AS total, s.seq, s.observed_at, s.location_id, s.location_external_key, s.duration_seconds
       FROM total LEFT JOIN shown s ON true
      ORDER BY s.at ${dir}, s.seq ${dir}`,
    params,
  );
  return {
    total: Number(rows[0]?.total ?? 0),
    rows: rows.filter((r) => r.seq !== null),
  };
}
