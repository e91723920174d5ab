/**
 * The writes every catalog record (asset, location, scan point) takes the same
 * way: a real change advances updated_at and the version; a rename changes
 * only the key; a soft delete stamps deleted_at.
 */
import { execute, Params, type Db } from "./catalog-db.ts";
import { nextUpdatedAt } from "./sql-fragments.ts";

export type RecordTable = "catalog.assets" | "catalog.locations" | "catalog.scan_points";

/** Applies `changes` (column -> value, each with its SQL cast from `casts`). */
export async function updateRecord<C extends object>(
  db: Db,
  table: RecordTable,
  orgId: number,
  id: number,
  changes: C,
  casts: Record<keyof C, string>,
): Promise<void> {
  const p = new Params([orgId, id]);
  const sets = Object.entries(changes).map(([column, value]) => `${column} = ${p.add(value)}${casts[column as keyof C]}`);
  await execute(
    db,
    `UPDATE ${table} SET ${[...sets, `updated_at = ${nextUpdatedAt()}`, "version = version + 1"].join(", ")}
      WHERE org_id = $1 AND id = $2`,
    p.values,
  );
}

export async function renameRecord(db: Db, table: RecordTable, orgId: number, id: number, externalKey: string): Promise<void> {
  await execute(
    db,
    `UPDATE ${table} SET external_key = $3, updated_at = ${nextUpdatedAt()}, version = version + 1
      WHERE org_id = $1 AND id = $2`,
    [orgId, id, externalKey],
  );
}

export async function softDeleteRecord(db: Db, table: RecordTable, orgId: number, id: number): Promise<void> {
  await execute(
    db,
    `UPDATE ${table}
        SET deleted_at = date_trunc('milliseconds', clock_timestamp()), updated_at = ${nextUpdatedAt()}, version = version + 1
      WHERE org_id = $1 AND id = $2`,
    [orgId, id],
  );
}
