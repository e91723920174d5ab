/**
 * The catalog's SQL surface (schema `catalog`): pg directly, prepared
 * statements, transactions (see packages/shared/src/sql.ts for why not
 * Prisma's raw queries on this path). The Prisma schema in prisma/catalog
 * stays the description of the tables and their migrations.
 */
import {
  checkDeadline,
  currentDeadline,
  hasSqlState,
  sqlExecute,
  sqlQuery,
  sqlQueryOne,
  sqlTransaction,
  uniqueViolationOf,
  type Pool,
  type Sql,
  type SqlTx,
} from "@whereabouts/shared";

export type CatalogClient = Pool;
/** Anything that runs SQL: the pool or an open transaction. */
export type Db = Sql;
export type Tx = SqlTx;

/**
 * Runs `work` in a transaction. With a `deadline` (the RPC caller's), the
 * transaction rolls back with 503 instead of committing once it has passed.
 */
export function inTransaction<T>(
  db: CatalogClient,
  work: (tx: Tx) => Promise<T>,
  options: { deadline?: number | undefined } = {},
): Promise<T> {
  return sqlTransaction(db, async (tx) => {
    const result = await work(tx);
    checkDeadline(options.deadline);
    return result;
  });
}

/** SQLSTATE of catalog.within_deadline: the caller's deadline passed (migration 20261231000000). */
const PAST_DEADLINE = "P0D01";

/**
 * A write in one statement (its own transaction), with the RPC caller's
 * deadline: `sql` ends by testing `catalog.within_deadline(...)` of its last
 * parameter, one past `params` (the deadline, appended here), after its
 * writes, so a write whose caller has given up rolls back with 503 as
 * inTransaction's does before COMMIT.
 */
export async function writeStatement<T>(db: CatalogClient, sql: string, params: unknown[]): Promise<T[]> {
  const deadline = currentDeadline();
  checkDeadline(deadline);
  try {
    return await sqlQuery<T>(db, sql, [...params, deadline ?? null]);
  } catch (err) {
    // Raised only for a deadline that was given, and has now passed: the same 503 as before COMMIT.
    if (hasSqlState(err, PAST_DEADLINE)) checkDeadline(deadline ?? 0);
    throw err;
  }
}

/** Typed query with positional parameters ($1, $2, ...). */
export const query = <T>(db: Db, sql: string, params: unknown[] = []): Promise<T[]> => sqlQuery<T>(db, sql, params);
export const queryOne = <T>(db: Db, sql: string, params: unknown[] = []): Promise<T | undefined> =>
  sqlQueryOne<T>(db, sql, params);
export const execute = (db: Db, sql: string, params: unknown[] = []): Promise<number> => sqlExecute(db, sql, params);

/** The unique index a failed statement violated, if that is why it failed. */
export const uniqueViolation = uniqueViolationOf;

/** Collects positional parameters while a statement is assembled. */
export class Params {
  readonly values: unknown[] = [];
  constructor(initial: unknown[] = []) {
    this.values.push(...initial);
  }
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}
