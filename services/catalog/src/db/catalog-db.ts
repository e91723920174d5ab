/** The catalog's Prisma client (schema `catalog`), transactions and error mapping. */
import { PrismaPg } from "@prisma/adapter-pg";
import { checkDeadline, type Pool } from "@whereabouts/shared";
import { PrismaClient, type Prisma } from "../generated/catalog/client.ts";

export type CatalogClient = InstanceType<typeof PrismaClient>;
/** Anything that runs raw SQL: the client or an open transaction. */
export type Db = Pick<Prisma.TransactionClient, "$queryRawUnsafe" | "$executeRawUnsafe">;
export type Tx = Prisma.TransactionClient;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createCatalogClient(connection: string | Pool, max = 10): CatalogClient {
  const adapter =
    typeof connection === "string"
      ? new PrismaPg({ connectionString: connection, max })
      : new PrismaPg(connection, { disposeExternalPool: true });
  return new PrismaClient({ adapter });
}

/**
 * Runs `work` in a transaction. With a `deadline` (the RPC caller's), the
 * transaction rolls back with 503 instead of committing once it has passed.
 */
export async function inTransaction<T>(
  db: CatalogClient,
  work: (tx: Tx) => Promise<T>,
  options: { deadline?: number | undefined } = {},
): Promise<T> {
  return db.$transaction(
    async (tx) => {
      const result = await work(tx);
      checkDeadline(options.deadline);
      return result;
    },
    { maxWait: 10_000, timeout: 20_000 },
  );
}

/** Typed raw query with positional parameters ($1, $2, ...). */
export function query<T>(db: Db, sql: string, params: unknown[] = []): Promise<T[]> {
  return db.$queryRawUnsafe<T[]>(sql, ...params);
}

export async function queryOne<T>(db: Db, sql: string, params: unknown[] = []): Promise<T | undefined> {
  const rows = await query<T>(db, sql, params);
  return rows[0];
}

export async function execute(db: Db, sql: string, params: unknown[] = []): Promise<number> {
  return db.$executeRawUnsafe(sql, ...params);
}

/** The unique index a failed statement violated, if that is why it failed. */
export function uniqueViolation(err: unknown): string | undefined {
  const meta = (err as { meta?: { driverAdapterError?: { cause?: Record<string, unknown> } } }).meta;
  const cause = meta?.driverAdapterError?.cause;
  if (!cause || cause.originalCode !== "23505") return undefined;
  const constraint = cause.constraint as { index?: string } | undefined;
  if (constraint?.index) return constraint.index;
  const message = String(cause.originalMessage ?? "");
  return /constraint "([^"]+)"/.exec(message)?.[1] ?? "unknown";
}

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
