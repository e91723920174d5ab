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

/**
 * Array parameters longer than this make a statement run unnamed, planned
 * for the rows it carries. After five runs a named statement may keep a
 * generic plan, made without its parameters' values: there `unnest($1)` is
 * taken for 10 rows, and a batch statement's joins between its CTEs became
 * nested loops. Tracking's scan batch joined the history rows it had to insert
 * through ON CONFLICT (all of them, for assets never scanned before) against
 * those it did insert that way: 64,000 reads of 64 scans made 4 billion
 * comparisons and the batch ran past its 60 s timeout. A batch pays its
 * planning (well under a millisecond) once; API statements, whose arrays are
 * a page of ids or a record's tags, keep their prepared plans.
 */
export const PLANNED_ARRAY_LENGTH = 100;

/**
 * The prepared statement name for a text, or undefined to run it unnamed:
 * when an array parameter is longer than PLANNED_ARRAY_LENGTH (above), or
 * once the cache is full.
 */
export function statementName(text: string, values: readonly unknown[] = []): string | undefined {
  if (values.some((v) => Array.isArray(v) && v.length > PLANNED_ARRAY_LENGTH)) return undefined;
  let name = names.get(text);
  if (name === undefined && names.size < MAX_PREPARED) {
    name = `s${createHash("sha1").update(text).digest("base64url").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/** Elements that must be quoted in an array literal: empty, NULL in any case, or holding a delimiter, quote or space. */
const NEEDS_QUOTES = /^$|^null$|[{}",\\\s]/i;

type PlainValue = number | boolean | string | null | undefined;

/**
 * An array parameter as Postgres' array literal text (`{1,2,NULL}`), built in
 * one pass; cast it in SQL as usual (`$1::int[]`). node-postgres prepares a
 * JS array element by element through several calls each (and quotes and
 * escapes every string): a tenth of tracking's CPU went there in scan batches
 * of 30,000 values, and a bulk job's event JSON was escaped twice over.
 */
export function arrayLiteral(values: ReadonlyArray<PlainValue>): string {
  // Plain values always make a literal.
  return statementParam(values) as string;
}

function mixedLiteral(values: ReadonlyArray<PlainValue>): string {
  let out = "{";
  for (let i = 0; i < values.length; i++) {
    if (i) out += ",";
    const v = values[i];
    if (v === null || v === undefined) out += "NULL";
    else if (typeof v === "number") out += String(v);
    else if (typeof v === "boolean") out += v ? "t" : "f";
    else out += NEEDS_QUOTES.test(v) ? `"${v.replace(/[\\"]/g, "\\$&")}"` : v;
  }
  return `${out}}`;
}

const isPlain = (v: unknown): v is PlainValue => v === null || v === undefined || typeof v === "number" || typeof v === "boolean" || typeof v === "string";

/**
 * A statement's parameters as they go to node-postgres: an array of plain
 * values (numbers, booleans, strings, nulls) as one array literal
 * (arrayLiteral), anything else as given (pg serializes it).
 */
export function statementParams(values: unknown[]): unknown[] {
  return values.map(statementParam);
}

/**
 * One parameter as statementParams gives it. An array is looked at once:
 * numbers only (joined), plain values (the literal's loop), or anything else
 * (returned as it is).
 */
export function statementParam(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  let numbers = true;
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (typeof v === "number") continue;
    numbers = false;
    if (!isPlain(v)) return value;
  }
  // Ids, counts, sequences, microseconds: a whole array of numbers is joined natively (about 40% less time than the loop).
  return numbers ? `{${value.join(",")}}` : mixedLiteral(value as PlainValue[]);
}

export async function sqlQuery<T>(db: Sql, text: string, values: unknown[] = []): Promise<T[]> {
  const name = statementName(text, values);
  const params = statementParams(values);
  const result = await db.query(name ? { name, text, values: params } : { text, values: params });
  return result.rows as T[];
}

export async function sqlQueryOne<T>(db: Sql, text: string, values: unknown[] = []): Promise<T | undefined> {
  return (await sqlQuery<T>(db, text, values))[0];
}

/** Rows the statement affected. */
export async function sqlExecute(db: Sql, text: string, values: unknown[] = []): Promise<number> {
  const name = statementName(text, values);
  const params = statementParams(values);
  const result = await db.query(name ? { name, text, values: params } : { text, values: params });
  return result.rowCount ?? 0;
}

/**
 * A pooled connection, held for a while. The pool stops listening for its
 * 'error' event while it is out, and an unheard one ends the process: a
 * connection the server drops (a restart, a failover, a proxy cut) would take
 * the service down. Here the error only fails the statement under way (or the
 * next one), and release() drops the listener again.
 */
export async function checkout(pool: pg.Pool): Promise<pg.PoolClient> {
  const client = await pool.connect();
  const ignore = () => undefined;
  client.on("error", ignore);
  const release = client.release;
  client.release = (err?: Error | boolean) => {
    client.removeListener("error", ignore);
    return release(err);
  };
  return client;
}

/** ROLLBACK of a failed transaction; returns the rollback's own failure, with which the connection is released (destroyed). */
export async function rollbackFailed(client: { query(sql: string): Promise<unknown> }): Promise<Error | undefined> {
  try {
    await client.query("ROLLBACK");
    return undefined;
  } catch (rollbackErr) {
    return rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
  }
}

/**
 * Runs `work` in a transaction on one pooled connection: COMMIT when it
 * resolves, ROLLBACK when it throws (the error is rethrown). A connection
 * whose rollback failed is destroyed rather than returned to the pool.
 */
export async function sqlTransaction<T>(pool: pg.Pool, work: (tx: SqlTx) => Promise<T>): Promise<T> {
  const client = await checkout(pool);
  return transactionOn(client, "BEGIN", () => work(client));
}

/**
 * `begin`, `work`, COMMIT on a checked-out client, which it then releases:
 * both transaction runners end a transaction this way, so a client whose
 * ROLLBACK failed is never handed back to the pool.
 */
export async function transactionOn<T>(client: pg.PoolClient, begin: string, work: () => Promise<T>): Promise<T> {
  let broken: Error | undefined;
  try {
    await client.query(begin);
    const result = await work();
    await client.query("COMMIT");
    return result;
  } catch (err) {
    broken = await rollbackFailed(client);
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The unique index a failed statement violated, if that is why it failed. */
export function uniqueViolationOf(err: unknown): string | undefined {
  if (sqlStateOf(err) !== "23505") return undefined;
  const e = err as { constraint?: string; message?: string };
  return e.constraint ?? /constraint "([^"]+)"/.exec(String(e.message ?? ""))?.[1] ?? "unknown";
}

/** SQLSTATE classes start with a digit or are HV, P0, XX or F0: a Node "EPIPE" or Prisma's "P2010" is none. */
const SQLSTATE = /^(?:[0-9][0-9A-Z]|HV|P0|XX|F0)[0-9A-Z]{3}$/;

/**
 * The Postgres SQLSTATE behind an error, if any: pg's `code`, or the one a
 * Prisma driver-adapter error carries in `meta.driverAdapterError.cause`,
 * looked for along the `cause` chain (errors wrapped by the stores).
 */
export function sqlStateOf(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const cause = (e as { meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; code?: unknown } } } }).meta?.driverAdapterError?.cause;
    for (const code of [cause?.originalCode, cause?.code, (e as { code?: unknown }).code]) {
      if (typeof code === "string" && SQLSTATE.test(code)) return code;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Lock timeout (55P03) or deadlock (40P01): the statement lost a race for locks; retrying is sound. */
export function isLockConflict(err: unknown): boolean {
  return hasSqlState(err, "55P03", "40P01");
}

/** True when the error's SQLSTATE is one of `codes`. */
export function hasSqlState(err: unknown, ...codes: string[]): boolean {
  const code = sqlStateOf(err);
  return code !== undefined && codes.includes(code);
}
