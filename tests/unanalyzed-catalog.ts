/**
 * A catalog as a large import leaves it, never analyzed (autovacuum off, or
 * right after the import): the data the plan tests EXPLAIN their statements on.
 */
import type pg from "pg";
import { eventually } from "@whereabouts/shared/testing";

export interface UnanalyzedCatalog {
  locations: number;
  /** Assets in organization 1, every 50th in organization 2. */
  assets: number;
  /** Which assets (SQL condition on the asset row `a`) have a position: at a location by id, in organization 1. */
  positioned: string;
  /** Which assets (condition on `a`) have an RFID tag. */
  tagged: string;
  /** Rows each of assets, tags and asset_positions must show as modified since analyze before the seed is done. */
  minModified: number;
  /** More SQL run with the inserts, before the statistics are waited for. */
  extra?: string;
}

/**
 * Seeds `c` and resolves once Postgres's statistics show the rows as never
 * analyzed (backends flush them at most once a second): the number of the
 * three tables that do, 3.
 */
export async function seedUnanalyzedCatalog(pool: pg.Pool, c: UnanalyzedCatalog): Promise<number> {
  await pool.query(`
    INSERT INTO catalog.locations (org_id, external_key, name, valid_from)
    SELECT 1, 'LOC-' || g, 'Location ' || g, now() FROM generate_series(1, ${c.locations}) g;
    INSERT INTO catalog.assets (org_id, external_key, name, valid_from)
    SELECT CASE WHEN g % 50 = 0 THEN 2 ELSE 1 END, 'A-' || g, 'Asset ' || g, now() FROM generate_series(1, ${c.assets}) g;
    INSERT INTO catalog.asset_positions (asset_id, org_id, location_id, observed_at, seq)
    SELECT a.id, a.org_id, 1 + a.id % ${c.locations}, now(), 1 FROM catalog.assets a WHERE a.org_id = 1 AND (${c.positioned});
    INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from)
    SELECT a.org_id, 'asset', a.id, 'rfid', 'E280' || lpad(a.id::text, 8, '0'), now() FROM catalog.assets a WHERE ${c.tagged};
    ${c.extra ?? ""}`);
  return eventually(async () => {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_user_tables
        WHERE schemaname = 'catalog' AND relname IN ('assets', 'tags', 'asset_positions') AND n_mod_since_analyze >= $1`,
      [c.minModified],
    );
    return Number(rows[0]!.n) === 3 ? 3 : undefined;
  });
}
