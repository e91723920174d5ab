/**
 * The reporting schema's database client and the SQL surface the stores use:
 * the shared pg client (no Prisma at runtime; the Prisma schema keeps the
 * migrations and typed models).
 */
import { createSqlClient, type Pool, type SqlClient, type SqlRunner } from "@whereabouts/shared";

export type { SqlRunner };
export type ReportingDb = SqlClient;

/**
 * From a URL, or from a pg Pool the caller watches (the client ends it on
 * $disconnect). Statements are not prepared: the rebuild swaps the live tables
 * and drops the old ones, and a prepared statement would lock those too
 * (createSqlClient's note), deadlocking readers with the DROP.
 */
export function createReportingDb(connection: string | Pool, max = 10): ReportingDb {
  return createSqlClient(connection, { max, prepare: false });
}

/** Long enough for a rebuild batch; live batches take milliseconds. */
export const TX_OPTIONS = { maxWait: 10_000, timeout: 120_000 } as const;

/**
 * The swap lock. Every projection transaction on the live tables takes it
 * shared first; the rebuild's swap takes it exclusive, so no batch straddles
 * the swap (see rebuild/rebuild-service.ts).
 */
export const SWAP_LOCK = "whereabouts:reporting:swap";

export async function takeSwapLockShared(tx: SqlRunner): Promise<void> {
  await tx.$queryRawUnsafe(`SELECT pg_advisory_xact_lock_shared(hashtext($1))::text AS locked`, SWAP_LOCK);
}

export async function takeSwapLockExclusive(tx: SqlRunner): Promise<void> {
  await tx.$queryRawUnsafe(`SELECT pg_advisory_xact_lock(hashtext($1))::text AS locked`, SWAP_LOCK);
}
