/**
 * A Prisma-shaped raw SQL client on `pg`: `$queryRawUnsafe`,
 * `$executeRawUnsafe`, `$transaction(work, { maxWait, timeout })` and
 * `$disconnect`, the surface tracking's and reporting's stores were written
 * against. Loading Prisma's client costs a service about 100 MB of RSS;
 * this costs what `pg` does (issue 9).
 *
 * Values come back as Prisma's pg adapter returns them, so the stores see no
 * difference: int8 (and int8[]) as BigInt, timestamptz as Date, timestamp
 * (no zone) and date read as UTC Dates, json/jsonb parsed. One exception:
 * numeric comes back as its exact text (Prisma gives a Decimal); the stores
 * cast what they read as numbers. The parsers are per query, so the pool's
 * other users (sql.ts's helpers) keep pg's defaults.
 *
 * Parameters: BigInt travels as text (pg cannot serialize it), Dates as UTC
 * ISO text, arrays element by element, null as NULL. Statements with
 * parameters are prepared once per connection (sql.ts's naming; not those
 * carrying a batch's arrays) unless the client is made with `prepare:
 * false`; statements without go as simple queries, as Prisma sent them (DDL,
 * several statements).
 *
 * Why `prepare: false` exists: a prepared statement whose tables were
 * renamed away re-checks its plan by first locking the tables it was
 * planned on (by identity, wherever they now are), so a schema that swaps
 * tables and then drops the old ones (reporting's rebuild) would have its
 * readers lock the dropped tables too, and deadlock with the DROP.
 */
import pg from "pg";
import { createPool } from "./db.ts";
import { checkout, statementName, statementParam, transactionOn } from "./sql.ts";

/** What stores need: raw SQL with bound parameters, on the client or inside a transaction. */
export interface SqlRunner {
  /** The rows, typed by the caller (`$queryRawUnsafe<Row[]>(...)`). */
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  /** The number of rows the statement affected. */
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

export interface TransactionOptions {
  /** How long to wait for a pooled connection, ms (Prisma's default: 2000). */
  maxWait?: number;
  /** How long the transaction may stay open, ms (Prisma's default: 5000). */
  timeout?: number;
}

export interface SqlClient extends SqlRunner {
  /**
   * Runs `work` in a transaction on one pooled connection: COMMIT when it
   * resolves, ROLLBACK when it throws (the error is rethrown). Past
   * `timeout` the transaction is expired: a statement in flight is
   * cancelled, later ones fail, and it rolls back with a
   * TransactionTimeoutError even if `work` then resolves.
   */
  $transaction<T>(work: (tx: SqlRunner) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Ends the pool. */
  $disconnect(): Promise<void>;
  readonly pool: pg.Pool;
}

export class TransactionTimeoutError extends Error {
  override readonly name = "TransactionTimeoutError";
}

export class ConnectionWaitTimeoutError extends Error {
  override readonly name = "ConnectionWaitTimeoutError";
}

const DEFAULT_MAX_WAIT_MS = 2000;
const DEFAULT_TIMEOUT_MS = 5000;

const { builtins } = pg.types;
const defaultParser = pg.types.getTypeParser as (oid: number, format?: "text" | "binary") => (s: string) => unknown;
const parseTextArray = defaultParser(1009); // text[]: elements as strings, NULL as null
const parseUtcTimestamp = (s: string): Date | string =>
  s === "infinity" || s === "-infinity" ? s : new Date(`${s.replace(" ", "T")}Z`);
const parseUtcDate = (s: string): Date | string => (s === "infinity" || s === "-infinity" ? s : new Date(`${s}T00:00:00Z`));

function mapNested(value: unknown, each: (s: string) => unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => mapNested(v, each));
  return value === null ? null : each(value as string);
}
const arrayOf = (each: (s: string) => unknown) => (s: string) => mapNested(parseTextArray(s), each);

const OVERRIDES = new Map<number, (s: string) => unknown>([
  [builtins.INT8, (s) => BigInt(s)],
  [1016, arrayOf((s) => BigInt(s))],
  [builtins.TIMESTAMP, parseUtcTimestamp],
  [1115, arrayOf(parseUtcTimestamp)],
  [builtins.DATE, parseUtcDate],
  [1182, arrayOf(parseUtcDate)],
]);

/** pg's per-query type table: Prisma's value shapes, pg's defaults otherwise. */
const TYPES = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    (format !== "binary" && OVERRIDES.get(oid)) || defaultParser(oid, format ?? "text")) as typeof pg.types.getTypeParser,
};

/** A parameter as pg can send it. */
export function sqlParam(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(sqlParam);
  return value ?? null;
}

type Queryable = Pick<pg.PoolClient, "query">;

async function run(db: Queryable, text: string, values: unknown[], prepare: boolean): Promise<pg.QueryResult> {
  if (values.length === 0) {
    // Several statements give one result each: the last one is the answer.
    const result = (await db.query({ text, types: TYPES })) as pg.QueryResult | pg.QueryResult[];
    return Array.isArray(result) ? result[result.length - 1]! : result;
  }
  // An array of plain values becomes its literal directly; only the rest is converted first (bigints, Dates), which
  // copied every batch array element by element (2% of tracking's CPU under ingest).
  const params = values.map((value) => {
    const param = statementParam(value);
    return param !== value ? param : statementParam(sqlParam(value));
  });
  const name = prepare ? statementName(text, values) : undefined;
  return db.query(name ? { name, text, values: params, types: TYPES } : { text, values: params, types: TYPES });
}

function runnerOn(db: Queryable, prepare: boolean): SqlRunner {
  return {
    async $queryRawUnsafe<T>(query: string, ...values: unknown[]): Promise<T> {
      return (await run(db, query, values, prepare)).rows as T;
    },
    async $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number> {
      return (await run(db, query, values, prepare)).rowCount ?? 0;
    },
  };
}

async function connectWithin(pool: pg.Pool, maxWaitMs: number): Promise<pg.PoolClient> {
  let timer: NodeJS.Timeout | undefined;
  let gaveUp = false;
  const connecting = checkout(pool);
  const waited = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      gaveUp = true;
      reject(new ConnectionWaitTimeoutError(`no database connection became free within ${maxWaitMs} ms`));
    }, maxWaitMs);
  });
  // A connection that arrives after we gave up goes straight back.
  connecting.then((c) => gaveUp && c.release(), () => undefined);
  try {
    return await Promise.race([connecting, waited]);
  } finally {
    clearTimeout(timer);
  }
}

export interface SqlClientOptions {
  /** Pool size when the client makes its own pool (from a URL). Default 10. */
  max?: number;
  /** Prepare statements with parameters once per connection (default true; see above for when not to). */
  prepare?: boolean;
}

/** From a URL (its own pool), or from a pg Pool the caller watches; $disconnect ends the pool. */
export function createSqlClient(connection: string | pg.Pool, options: SqlClientOptions = {}): SqlClient {
  const pool = typeof connection === "string" ? createPool(connection, options.max ?? 10) : connection;
  const prepare = options.prepare ?? true;
  return {
    pool,
    ...runnerOn(pool, prepare),
    async $transaction<T>(work: (tx: SqlRunner) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
      const timeoutMs = options.timeout ?? DEFAULT_TIMEOUT_MS;
      const client = await connectWithin(pool, options.maxWait ?? DEFAULT_MAX_WAIT_MS);
      const expiredError = () => new TransactionTimeoutError(`the transaction ran past its timeout of ${timeoutMs} ms and was rolled back`);
      let expired = false;
      let inFlight = 0;
      const pid = (client as unknown as { processID?: number }).processID;
      const timer = setTimeout(() => {
        expired = true;
        // Stop a statement still running, so the rollback is not queued behind it.
        if (inFlight > 0 && pid !== undefined) pool.query("SELECT pg_cancel_backend($1)", [pid]).catch(() => undefined);
      }, timeoutMs);
      const counting: Queryable = {
        query: (async (config: pg.QueryConfig) => {
          if (expired) throw expiredError();
          inFlight++;
          try {
            return await client.query(config);
          } finally {
            inFlight--;
          }
        }) as Queryable["query"],
      };
      // SET LOCAL: the server's backstop for a process that stalls between statements.
      const begin = `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${Math.max(1, Math.ceil(timeoutMs))}`;
      try {
        return await transactionOn(client, begin, async () => {
          let result: T;
          try {
            result = await work(runnerOn(counting, prepare));
          } catch (err) {
            throw expired ? expiredError() : err;
          }
          if (expired) throw expiredError();
          return result;
        });
      } finally {
        clearTimeout(timer);
      }
    },
    $disconnect: () => pool.end(),
  };
}
