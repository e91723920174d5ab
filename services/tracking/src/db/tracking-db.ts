/** Tracking's Prisma client (schema `tracking`), transactions and raw-SQL helpers. */
import { PrismaPg } from "@prisma/adapter-pg";
import type { Pool } from "@whereabouts/shared";
import { PrismaClient, type Prisma } from "../generated/tracking/client.ts";

export type TrackingClient = InstanceType<typeof PrismaClient>;
/** Anything that runs raw SQL: the client or an open transaction. */
export type Db = Pick<Prisma.TransactionClient, "$queryRawUnsafe" | "$executeRawUnsafe">;
export type Tx = Prisma.TransactionClient;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createTrackingClient(connection: string | Pool, max = 10): TrackingClient {
  const adapter =
    typeof connection === "string"
      ? new PrismaPg({ connectionString: connection, max })
      : new PrismaPg(connection, { disposeExternalPool: true });
  return new PrismaClient({ adapter });
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
