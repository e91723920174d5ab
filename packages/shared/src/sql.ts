/**
 * The SQL surface of the services' stores: `pg` directly, with named prepared
 * statements. Prisma keeps the schemas, migrations and typed models; the hot
 * paths run here because Prisma's raw queries cost measurable time per call
 * (about 0.3 ms of client work, and an unnamed statement planned afresh every
 * time: 1-3 ms of planning for a record view with its embedded tags).
 *
 * Every statement is prepared once per connection under a name derived from
 * its text. The texts are the code's own (values always travel as
 * parameters), so their number is bounded; past MAX_PREPARED distinct texts,
 * new ones run unnamed rather than grow every connection's cache.
 */
import { createHash } from "node:crypto";
import type pg from "pg";

/** Anything that runs a statement: the pool, or a client inside a transaction. */
export type Sql = Pick<pg.Pool | pg.PoolClient, "query">;
export type SqlTx = pg.PoolClient;

const MAX_PREPARED = 2000;
const names = new Map<string, string>();

function statementName(text: string): string | undefined {
  let name = names.get(text);
  if (name === undefined && names.size < MAX_PREPARED) {
    name = `s${createHash("sha1").update(text).digest("base64url").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

export async function sqlQuery<T>(db: Sql, text: string, values: unknown[] = []): Promise<T[]> {
  const name = statementName(text);
  const result = await db.query(name ? { name, text, values } : { text, values });
  return result.rows as T[];
}

export async function sqlQueryOne<T>(db: Sql, text: string, values: unknown[] = []): Promise<T | undefined> {
  return (await sqlQuery<T>(db, text, values))[0];
}

/** Rows the statement affected. */
export async function sqlExecute(db: Sql, text: string, values: unknown[] = []): Promise<number> {
  const name = statementName(text);
  const result = await db.query(name ? { name, text, values } : { text, values });
  return result.rowCount ?? 0;
}

/**
 * Runs `work` in a transaction on one pooled connection: COMMIT when it
 * resolves, ROLLBACK when it throws (the error is rethrown). A connection
 * whose rollback failed is destroyed rather than returned to the pool.
 */
export async function sqlTransaction<T>(pool: pg.Pool, work: (tx: SqlTx) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch((rollbackErr: unknown) => {
      broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The unique index a failed statement violated, if that is why it failed. */
export function uniqueViolationOf(err: unknown): string | undefined {
  const e = err as { code?: string; constraint?: string; message?: string } | null;
  if (!e || e.code !== "23505") return undefined;
  return e.constraint ?? /constraint "([^"]+)"/.exec(String(e.message ?? ""))?.[1] ?? "unknown";
}
