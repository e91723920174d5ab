/**
 * The location summary in SQL (GET /api/v1/locations/<id>/summary). Reporting
 * answers it because it alone holds, per asset, where it is, when it was last
 * seen and whether it is live and currently effective; the tree comes from
 * catalog's location events (location_rollups.parent_id, location_closure).
 *
 * Reading of the spec: assets count when live, known to catalog and currently
 * effective; a location of the subtree counts when live and currently
 * effective (the location asked for included): an expired location's own
 * assets drop out, its effective descendants still count, as the tree
 * endpoints keep structure regardless of validity.
 *
 * Cost: one closure range (the subtree's locations) joined to its counters
 * (assets_effective, kept by triggers for "now"; the transitions loop of
 * rollup-transitions.ts applies validity boundaries as they fall due, so a
 * count may lag one by about the loop's period, 1 s); last seen by probing the
 * locations with the highest upper bounds only. Never a walk over the
 * subtree's assets, nor a look at any asset outside it.
 */
import { effectiveSql, wireTimestampSql } from "@whereabouts/shared";
import type { SqlRunner } from "../reporting-db.ts";

/** The subtree's live, currently effective locations ($1 org, $2 the root of it). */
const SUBTREE = `sub AS MATERIALIZED (
    SELECT c.descendant_id AS id FROM reporting.location_closure c
      JOIN reporting.locations l ON l.org_id = c.org_id AND l.location_id = c.descendant_id
     WHERE c.org_id = $1 AND c.ancestor_id = $2 AND l.deleted_at IS NULL AND ${effectiveSql("l")})`;

export interface SummaryCounts {
  assets_here: number;
  assets_in_subtree: number;
}

/** Undefined when the location is not live in the organization. */
export async function liveLocation(db: SqlRunner, orgId: number, id: number): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<unknown[]>(
    `SELECT 1 AS found FROM reporting.locations WHERE org_id = $1 AND location_id = $2 AND deleted_at IS NULL`,
    orgId,
    id,
  );
  return rows.length > 0;
}

export async function summaryCounts(db: SqlRunner, orgId: number, id: number): Promise<SummaryCounts> {
  const [row] = await db.$queryRawUnsafe<Array<{ here: number; subtree: number }>>(
    `WITH ${SUBTREE}
     SELECT COALESCE(sum(r.assets_effective) FILTER (WHERE r.location_id = $2), 0)::int AS here,
            COALESCE(sum(r.assets_effective), 0)::int AS subtree
       FROM sub JOIN reporting.location_rollups r ON r.org_id = $1 AND r.location_id = sub.id`,
    orgId,
    id,
  );
  return { assets_here: row!.here, assets_in_subtree: row!.subtree };
}

/**
 * The newest last seen among the counted assets of the subtree. Locations are
 * taken by their upper bound (last_seen_max), highest first, `probe` at a time;
 * each gets its real newest counted asset through positions_location_idx. Once
 * the best real value reaches the lowest bound probed, no other location can
 * beat it.
 */
export async function lastSeenInSubtree(db: SqlRunner, orgId: number, id: number, probe = 16): Promise<string | null> {
  for (let limit = probe; ; limit *= 4) {
    const rows = await db.$queryRawUnsafe<Array<{ bound: Date; seen: string | null }>>(
      `WITH ${SUBTREE},
       candidates AS (
         SELECT r.location_id, r.last_seen_max FROM sub JOIN reporting.location_rollups r ON r.org_id = $1 AND r.location_id = sub.id
          WHERE r.last_seen_max IS NOT NULL
          ORDER BY r.last_seen_max DESC LIMIT $3)
       SELECT c.last_seen_max AS bound,
              ${wireTimestampSql("x.last_seen_at")} AS seen
         FROM candidates c
         LEFT JOIN LATERAL (
           SELECT p.last_seen_at FROM reporting.positions p
             JOIN reporting.assets a ON a.org_id = p.org_id AND a.asset_id = p.asset_id
            WHERE p.org_id = $1 AND p.location_id = c.location_id
              AND a.external_key IS NOT NULL AND a.deleted_at IS NULL AND ${effectiveSql("a")}
            ORDER BY p.last_seen_at DESC, p.asset_id DESC LIMIT 1) x ON true
        ORDER BY c.last_seen_max DESC`,
      orgId,
      id,
      limit,
    );
    // The wire text sorts as the instant does (fixed width, UTC).
    const best = rows.reduce<string | null>((max, r) => (r.seen !== null && (max === null || r.seen > max) ? r.seen : max), null);
    const lowestBound = rows.at(-1)?.bound;
    if (rows.length < limit || (best !== null && lowestBound !== undefined && Date.parse(best) >= lowestBound.getTime())) return best;
  }
}
