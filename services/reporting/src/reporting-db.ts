/** The reporting schema's Prisma client (driver adapter pg), and the SQL surface the stores use. */
import { PrismaPg } from "@prisma/adapter-pg";
import type { Pool } from "@whereabouts/shared";
import { PrismaClient } from "./generated/reporting/client.ts";

export type ReportingDb = InstanceType<typeof PrismaClient>;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createReportingDb(connection: string | Pool, max = 10): ReportingDb {
  const adapter =
    typeof connection === "string"
      ? new PrismaPg({ connectionString: connection, max })
      : new PrismaPg(connection, { disposeExternalPool: true });
  return new PrismaClient({ adapter });
}

/** What stores need: raw SQL with bound parameters, on the client or inside a transaction. */
export interface SqlRunner {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
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
