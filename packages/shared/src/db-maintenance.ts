/**
 * Planner statistics that do not depend on luck. Postgres plans from the
 * statistics ANALYZE gathers; production runs autovacuum, but a database with
 * it off (this CI machine), or a large import before autoanalyze wakes up,
 * would plan from none. So: the migrator analyzes what it migrated, and each
 * service runs a maintenance loop that, when it finds autovacuum off, does
 * autovacuum's job for its own schema with autovacuum's default thresholds.
 * Several replicas may run the loop: an advisory lock lets one work at a time.
 */
import type pg from "pg";
import type { Logger } from "pino";
import { quoteIdent } from "./db.ts";
import { startPeriodic } from "./periodic.ts";
import { checkout } from "./sql.ts";

/** ANALYZE every table of `schema` (cheap on small tables; sampled on large ones). */
export async function analyzeSchema(db: Pick<pg.Pool | pg.Client, "query">, schema: string): Promise<string[]> {
  const { rows } = await db.query<{ relname: string }>(
    `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
    [schema],
  );
  for (const { relname } of rows) await db.query(`ANALYZE ${quoteIdent(schema)}.${quoteIdent(relname)}`);
  return rows.map((r) => r.relname);
}

/** autovacuum's defaults: act after 50 rows plus a fraction of the table changed. */
const ANALYZE_THRESHOLD = { base: 50, scale: 0.1 };
const VACUUM_THRESHOLD = { base: 50, scale: 0.2 };

export interface TableUpkeep {
  table: string;
  analyzed: boolean;
  vacuumed: boolean;
}

/**
 * One pass over `schema`: ANALYZE the tables changed beyond autovacuum's
 * analyze threshold (or never analyzed), VACUUM those with dead rows beyond
 * its vacuum threshold. Returns what it did.
 */
export async function maintainSchema(pool: pg.Pool, schema: string): Promise<TableUpkeep[]> {
  const { rows } = await pool.query<{
    relname: string;
    live: string;
    dead: string;
    modified: string;
    analyzed: boolean;
  }>(
    `SELECT relname, n_live_tup AS live, n_dead_tup AS dead, n_mod_since_analyze AS modified,
            (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL) AS analyzed
       FROM pg_stat_user_tables WHERE schemaname = $1`,
    [schema],
  );
  const done: TableUpkeep[] = [];
  for (const r of rows) {
    const live = Number(r.live);
    const analyze =
      Number(r.modified) > ANALYZE_THRESHOLD.base + ANALYZE_THRESHOLD.scale * live || (!r.analyzed && live + Number(r.modified) > 0);
    const vacuum = Number(r.dead) > VACUUM_THRESHOLD.base + VACUUM_THRESHOLD.scale * live;
    if (!analyze && !vacuum) continue;
    const table = `${quoteIdent(schema)}.${quoteIdent(r.relname)}`;
    // VACUUM cannot run in a transaction block: each statement on its own.
    await pool.query(vacuum ? `VACUUM (ANALYZE) ${table}` : `ANALYZE ${table}`);
    done.push({ table: r.relname, analyzed: true, vacuumed: vacuum });
  }
  return done;
}

/** True when the server (and so every table without its own setting) runs autovacuum. */
export async function autovacuumEnabled(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'autovacuum'`);
  return rows[0]?.setting === "on";
}

/**
 * Starts the loop for `schema`: every `intervalMs` while autovacuum is off
 * (checked each time: an operator may turn it on or off). Logs one warning
 * the first time it finds autovacuum off.
 */
export function startDbMaintenance(options: {
  pool: pg.Pool;
  schema: string;
  logger: Logger;
  intervalMs?: number;
}): { stop(): Promise<void> } {
  const { pool, schema, logger } = options;
  const intervalMs = options.intervalMs ?? 15_000;
  let warned = false;

  const pass = async () => {
    if (await autovacuumEnabled(pool)) return;
    if (!warned) {
      warned = true;
      logger.warn({ schema }, "autovacuum is off: this service analyzes and vacuums its own tables");
    }
    const client = await checkout(pool);
    try {
      const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS locked", [
        `whereabouts:maintain:${schema}`,
      ]);
      if (!rows[0]?.locked) return;
      try {
        const done = await maintainSchema(pool, schema);
        if (done.length) logger.info({ schema, tables: done }, "table statistics refreshed");
      } finally {
        await client.query("SELECT pg_advisory_unlock(hashtext($1))", [`whereabouts:maintain:${schema}`]);
      }
    } finally {
      client.release();
    }
  };

  return startPeriodic({
    everyMs: intervalMs,
    // The first pass soon after start: a service may boot on a freshly imported database.
    firstAfterMs: Math.min(intervalMs, 1000),
    round: pass,
    onError: (err) => logger.warn({ err, schema }, "table maintenance failed; will retry"),
  });
}
