/**
 * The two counts every fault test of ingestion checks, read straight from
 * tracking's history table: how many rows there are (lost reads show as too
 * few) and how many (asset, instant) pairs hold more than one row (a read
 * recorded twice). Callers give every scan its own instant, so a tie can only
 * be a duplicate. Shared by tests/tracking-faults.test.ts and `npm run chaos`.
 */
import type pg from "pg";

/** `assetIds` narrows the count to those assets; without it, the whole organization. */
export async function historyRowCount(sql: pg.Client, orgId: number, assetIds?: readonly number[]): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM tracking.history WHERE org_id = $1 AND ($2::int[] IS NULL OR asset_id = ANY($2::int[]))",
    [orgId, assetIds ?? null],
  );
  return rows[0]!.n;
}

/** (asset, instant) pairs with more than one history row: the low 4 bits of observed_key are the tie. */
export async function duplicateHistoryRows(sql: pg.Client, orgId: number, assetIds?: readonly number[]): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT asset_id, observed_key >> 4 FROM tracking.history
      WHERE org_id = $1 AND ($2::int[] IS NULL OR asset_id = ANY($2::int[])) GROUP BY 1, 2 HAVING count(*) > 1) d`,
    [orgId, assetIds ?? null],
  );
  return rows[0]!.n;
}
