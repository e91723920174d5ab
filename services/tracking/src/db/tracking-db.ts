/**
 * Tracking's database client (schema `tracking`), transactions and raw-SQL
 * helpers: the shared pg client (no Prisma at runtime; the Prisma schema
 * keeps the migrations and typed models).
 */
import { createSqlClient, type Pool, type SqlClient, type SqlRunner } from "@whereabouts/shared";

export type TrackingClient = SqlClient;
/** Anything that runs raw SQL: the client or an open transaction. */
export type Db = SqlRunner;
export type Tx = SqlRunner;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createTrackingClient(connection: string | Pool, max = 10): TrackingClient {
  return createSqlClient(connection, { max });
}

export function inTransaction<T>(db: TrackingClient, work: (tx: Tx) => Promise<T>): Promise<T> {
  return db.$transaction(work, { maxWait: 10_000, timeout: 60_000 });
}

/** Typed raw query with positional parameters ($1, $2, ...). */
export function query<T>(db: Db, sql: string, params: unknown[] = []): Promise<T[]> {
  return db.$queryRawUnsafe<T[]>(sql, ...params);
}

export function execute(db: Db, sql: string, params: unknown[] = []): Promise<number> {
  return db.$executeRawUnsafe(sql, ...params);
}

/** True when the database answers (tells a broken message from a broken database). */
export async function databaseHealthy(db: Db): Promise<boolean> {
  try {
    await query(db, "SELECT 1");
    return true;
  } catch {
    return false;
  }
}
