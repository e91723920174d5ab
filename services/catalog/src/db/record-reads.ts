/**
 * The reads every catalog record (asset, location, scan point) takes the same
 * way by id: its view for a GET, locked with its version and validity for a
 * change, and in any state for the event a change publishes.
 */
import { arrayLiteral, microsTimestampSql } from "@whereabouts/shared";
import { query, queryOne, type Db } from "./catalog-db.ts";
import { rowById } from "./sql-fragments.ts";
import type { RecordTable } from "./record-writes.ts";

/** A live record locked for a change. */
export interface RecordState<V> {
  view: V;
  version: number;
  /** Validity bounds as stored, to the microsecond. */
  valid_from_us: string;
  valid_to_us: string | null;
}

/**
 * The record `alias` of `table`, rendered by its views (json, and JSON text for a GET) over `joins`
 * (`manyJoins` for several records at once: joins the planner cannot turn into a scan of a whole table).
 */
export function recordReads<V>(table: RecordTable, alias: string, views: { json: string; text: string }, joins: string, manyJoins = joins) {
  const byId = (lock?: "UPDATE" | "SHARE") => `${rowById(table, "$2", lock)} ${alias} ${joins}`;
  // Built once: a statement's text is the key of its prepared statement, and building and hashing
  // a view's kilobyte-and-a-half of SQL on every GET showed in catalog's profile.
  const findSql = `SELECT ${views.text} AS view FROM ${byId()} WHERE ${alias}.org_id = $1 AND ${alias}.deleted_at IS NULL`;
  // Several ids: one primary-key lookup each (the lateral rowById), whatever the statistics.
  const findManySql = `SELECT k.id, ${views.text} AS view
      FROM unnest($2::int[]) AS k(id) CROSS JOIN LATERAL ${rowById(table, "k.id")} ${alias} ${manyJoins}
     WHERE ${alias}.org_id = $1 AND ${alias}.deleted_at IS NULL`;
  const lockSql = (mode: "UPDATE" | "SHARE") =>
    `SELECT ${views.json} AS view, ${alias}.version, ${microsTimestampSql(`${alias}.valid_from`)} AS valid_from_us, ${microsTimestampSql(`${alias}.valid_to`)} AS valid_to_us
       FROM ${byId(mode)} WHERE ${alias}.org_id = $1 AND ${alias}.deleted_at IS NULL`;
  const lockSqls = { UPDATE: lockSql("UPDATE"), SHARE: lockSql("SHARE") };
  const loadSql = `SELECT ${views.json} AS view, ${alias}.version FROM ${byId()} WHERE ${alias}.org_id = $1`;
  return {
    /** A live record by id (no effectiveness predicate: visibility rule 3), as JSON text. */
    async find(db: Db, orgId: number, id: number): Promise<string | undefined> {
      const row = await queryOne<{ view: string }>(db, findSql, [orgId, id]);
      return row?.view;
    },
    /** Live records by id (as find), JSON text by id; an id not found is absent. */
    async findMany(db: Db, orgId: number, ids: readonly number[]): Promise<Map<number, string>> {
      const rows = await query<{ id: number; view: string }>(db, findManySql, [orgId, arrayLiteral(ids)]);
      return new Map(rows.map((r) => [r.id, r.view]));
    },
    /** Locks a live record for a change and returns its current state. */
    lock(db: Db, orgId: number, id: number, mode: "UPDATE" | "SHARE" = "UPDATE"): Promise<RecordState<V> | undefined> {
      return queryOne<RecordState<V>>(db, lockSqls[mode], [orgId, id]);
    },
    /** Any record by id, deleted or not, with its version (for events). */
    async load(db: Db, orgId: number, id: number): Promise<{ view: V; version: number }> {
      const row = await queryOne<{ view: V; version: number }>(db, loadSql, [orgId, id]);
      return row!;
    },
  };
}
