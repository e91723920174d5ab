/**
 * Auto-minted external keys: ASSET-NNNN / LOC-NNNN (at least four digits) from
 * a per-organization, per-type counter; a value a caller already took for a
 * live row is skipped.
 *
 * Minted before the creating transaction, each statement committing at once,
 * as a Postgres sequence would: the counter row stays locked for one statement
 * instead of a whole create, so an organization's creates no longer take turns
 * (they did: about 60 creates/s at most). The price is a sequence's: a create
 * that fails after minting leaves a gap. Two creates can still pick the same
 * free value when a caller's own key is being inserted at the same time; the
 * unique index refuses one, and the caller mints again.
 */
import { execute, query, queryOne, type Db } from "./catalog-db.ts";

const KINDS = {
  asset: { table: "catalog.assets", prefix: "ASSET-" },
  location: { table: "catalog.locations", prefix: "LOC-" },
} as const;

export type KeyKind = keyof typeof KINDS;

const SKIP_WINDOW = 1000;

export async function mintExternalKey(db: Db, orgId: number, kind: KeyKind): Promise<string> {
  const { table, prefix } = KINDS[kind];
  const bumped = await queryOne<{ n: number }>(
    db,
    `INSERT INTO catalog.key_sequences (org_id, entity, last_value) VALUES ($1, $2, 1)
     ON CONFLICT (org_id, entity) DO UPDATE SET last_value = catalog.key_sequences.last_value + 1
     RETURNING last_value AS n`,
    [orgId, kind],
  );
  let from = bumped!.n;
  for (;;) {
    // The first value in the window whose key no live row holds.
    const free = await query<{ n: number; key: string }>(
      db,
      `SELECT s.n, $3 || CASE WHEN s.n < 10000 THEN lpad(s.n::text, 4, '0') ELSE s.n::text END AS key
         FROM generate_series($2::int, $2::int + ${SKIP_WINDOW - 1}) AS s(n)
        WHERE NOT EXISTS (
          SELECT 1 FROM ${table} r
           WHERE r.org_id = $1 AND r.deleted_at IS NULL
             AND r.external_key = $3 || CASE WHEN s.n < 10000 THEN lpad(s.n::text, 4, '0') ELSE s.n::text END)
        ORDER BY s.n LIMIT 1`,
      [orgId, from, prefix],
    );
    const found = free[0];
    const last = found ? found.n : from + SKIP_WINDOW - 1;
    if (last !== bumped!.n) {
      await execute(db, `UPDATE catalog.key_sequences SET last_value = GREATEST(last_value, $3) WHERE org_id = $1 AND entity = $2`, [
        orgId,
        kind,
        last,
      ]);
    }
    if (found) return found.key;
    from += SKIP_WINDOW;
  }
}
