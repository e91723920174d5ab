/**
 * Postgres plumbing shared by every service: creating the database when it
 * is missing, pools, and the migrator that applies `prisma/<service>/migrations`
 * the way `prisma migrate deploy` would, without Prisma's native engine.
 */
import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { analyzeSchema } from "./db-maintenance.ts";
import { hasSqlState } from "./sql.ts";

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/**
 * `pipeline`: every statement queued on a connection goes out at once, not
 * each after the one before has answered (a long transaction that queues its
 * next statements while its process is busy elsewhere). Cursors and row-limited
 * reads are refused on such a connection.
 */
export function createPool(connectionString: string, max = 10, options: { pipeline?: boolean } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    idleTimeoutMillis: 30_000,
    pipeline: options.pipeline ?? false,
    options: sessionOptions(process.env.PGOPTIONS),
  });
  // An idle connection that the server drops (a restart, a failover) is an
  // 'error' event; unhandled it would end the process. The pool discards that
  // connection, and the next query reports the outage to its caller.
  pool.on("error", () => undefined);
  return pool;
}

/**
 * The session settings of every service connection, then any the operator
 * gives in PGOPTIONS (libpq's variable, which an explicit `options` would
 * otherwise hide), which win; options in the URL win over both.
 *
 * JIT compilation off: a set-based statement over a few thousand rows (a bulk
 * chunk, a replica's batch) is estimated dear enough for Postgres to compile
 * its expressions, 30-40 ms each time, as long as the statement itself takes
 * without it: 40 of 120 ms of each 2,000-row bulk chunk. No statement here runs
 * long enough to win it back.
 */
export function sessionOptions(operator: string | undefined): string {
  return ["-c jit=off", operator?.trim()].filter(Boolean).join(" ");
}

/** Creates the database named in the URL if it does not exist yet (race-safe). */
export async function ensureDatabase(connectionString: string): Promise<void> {
  const url = new URL(connectionString);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (!name) throw new Error("DATABASE_URL names no database");
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (rowCount) return;
    try {
      await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
    } catch (err) {
      // Another process created it between our check and our create.
      if (!hasSqlState(err, "42P04", "23505")) throw err;
    }
  } finally {
    await client.end();
  }
}

export async function dropDatabase(connectionString: string): Promise<void> {
  const url = new URL(connectionString);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/**
 * One array per field, in order: the parameters of a batch statement that
 * reads its rows with `unnest($1::int[], $2::text[], ...)` (each goes out as
 * one array literal: statementParams).
 */
export function unnestColumns<R>(rows: readonly R[], ...fields: Array<keyof R>): unknown[][] {
  return fields.map((field) => rows.map((row) => row[field]));
}

export const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

export interface MigrationResult {
  schema: string;
  applied: string[];
  skipped: string[];
}

/** The table `prisma migrate deploy` keeps, one per service schema. */
const MIGRATIONS_TABLE_SQL = (schema: string) => `
CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}."_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

/** `<dir>/<name>/migration.sql` in name order; a missing folder has none. */
export async function listMigrations(migrationsDir: string): Promise<Array<{ name: string; sql: string; checksum: string }>> {
  let entries;
  try {
    entries = await readdir(migrationsDir, { withFileTypes: true });
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return [];
    throw err;
  }
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(migrationsDir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/**
 * Applies every migration not yet recorded, in name order, each in its own
 * transaction, under an advisory lock so replicas starting together migrate
 * once. A recorded migration whose file changed since is refused: history
 * must not be rewritten.
 */
export async function migrate(options: {
  connectionString: string;
  schema: string;
  migrationsDir: string;
  log?: (message: string) => void;
}): Promise<MigrationResult> {
  const { schema } = options;
  const migrations = await listMigrations(options.migrationsDir);
  const client = new pg.Client({ connectionString: options.connectionString });
  await client.connect();
  const lockKey = `whereabouts:migrate:${schema}`;
  try {
    await client.query("SELECT pg_advisory_lock(hashtext($1))", [lockKey]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    await client.query(MIGRATIONS_TABLE_SQL(schema));
    const { rows } = await client.query<{ migration_name: string; checksum: string }>(
      `SELECT migration_name, checksum FROM ${quoteIdent(schema)}."_prisma_migrations"
        WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    const done = new Map(rows.map((r) => [r.migration_name, r.checksum]));
    const result: MigrationResult = { schema, applied: [], skipped: [] };
    for (const migration of migrations) {
      const recorded = done.get(migration.name);
      if (recorded !== undefined) {
        if (recorded !== migration.checksum) {
          throw new Error(`Migration ${schema}/${migration.name} was modified after it was applied`);
        }
        result.skipped.push(migration.name);
        continue;
      }
      await client.query("BEGIN");
      try {
        const startedAt = new Date();
        await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
        await client.query(migration.sql);
        // As `prisma migrate deploy` records it (checksum: SHA-256 of the file, hex).
        await client.query(
          `INSERT INTO ${quoteIdent(schema)}."_prisma_migrations"
             (id, checksum, finished_at, migration_name, logs, rolled_back_at, started_at, applied_steps_count)
           VALUES ($1, $2, clock_timestamp(), $3, NULL, NULL, $4, 1)`,
          [randomUUID(), migration.checksum, migration.name, startedAt],
        );
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK");
        throw new Error(`Migration ${schema}/${migration.name} failed: ${(err as Error).message}`, { cause: err });
      }
      options.log?.(`applied ${schema}/${migration.name}`);
      result.applied.push(migration.name);
    }
    // Fresh statistics for what changed: plans must not wait for autoanalyze.
    if (result.applied.length) await analyzeSchema(client, schema);
    return result;
  } finally {
    await client.query("SELECT pg_advisory_unlock(hashtext($1))", [lockKey]).catch(() => undefined);
    await client.end();
  }
}
