/**
 * History retention (EXTENSIONS.md section 5): an organization's
 * `history_retention_days` removes its older history rows in the background,
 * a hundred assets per short transaction (no long locks; scans go on), with
 * progress in the logs and `whereabouts_history_rows_removed_total`. Per
 * asset, the newest removed row is kept as its floor, so the oldest kept
 * row's duration_seconds is what it was; the asset's history_count drops by
 * what went. One replica at a time (an advisory lock).
 *
 * A pass is paced (`dutyPercent`): after each batch it pauses for as long as
 * keeps its busy share of wall time at that percent, so a large backlog of
 * old rows (a retention switched on, a shortened one) is removed over a
 * longer time instead of taking the database's CPU from ingestion.
 */
import type pg from "pg";
import { setTimeout as pause } from "node:timers/promises";
import { checkout, epochMicrosSql, startPeriodic, type Logger, type Metrics, type Worker } from "@whereabouts/shared";

const ASSETS_PER_BATCH = 100;
const LOCK = "whereabouts:tracking:history-retention";

/** How long to pause after a batch that took `busyMs` to stay at `dutyPercent` of wall time. */
export function retentionPauseMs(busyMs: number, dutyPercent: number): number {
  return dutyPercent >= 100 ? 0 : Math.round((busyMs * (100 - dutyPercent)) / dutyPercent);
}

/** One pass over every organization with a retention; returns the rows removed. */
export async function retireHistory(
  pool: pg.Pool,
  logger: Logger,
  metrics?: Metrics,
  options: { dutyPercent?: number; stopping?: () => boolean } = {},
): Promise<number> {
  const dutyPercent = options.dutyPercent ?? 100;
  const client = await checkout(pool);
  let total = 0;
  try {
    const { rows: locked } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [LOCK]);
    if (!locked[0]?.ok) return 0;
    try {
      const { rows: orgs } = await client.query<{ id: number; days: number }>(
        `SELECT id, history_retention_days AS days FROM tracking.orgs WHERE history_retention_days IS NOT NULL ORDER BY id`,
      );
      for (const org of orgs) {
        let after = 0;
        let removed = 0;
        let assets = 0;
        for (;;) {
          if (options.stopping?.()) break;
          const started = performance.now();
          const { rows } = await client.query<{ last: number | null; scanned: number; removed: string }>(
            // The batch's positions are locked first, in asset order, as a scan
            // batch locks them: the count update below then waits on nothing, so
            // the two cannot deadlock (they did, taking rows in hash-join order).
            `WITH a AS (
               SELECT asset_id FROM tracking.positions WHERE org_id = $1 AND asset_id > $2 ORDER BY asset_id LIMIT $3
                  FOR NO KEY UPDATE
             ), cutoff AS (
               SELECT (${epochMicrosSql("now() - make_interval(days => $4)")}) * 16 AS key
             ), gone AS (
               DELETE FROM tracking.history h USING a, cutoff
                WHERE h.org_id = $1 AND h.asset_id = a.asset_id AND h.observed_key < cutoff.key
               RETURNING h.asset_id, h.observed_key
             ), per AS (
               SELECT asset_id, max(observed_key) AS floor, count(*)::int AS n FROM gone GROUP BY asset_id
             ), floors AS (
               INSERT INTO tracking.history_floors AS f (org_id, asset_id, observed_key)
               SELECT $1, asset_id, floor FROM per ORDER BY asset_id
               ON CONFLICT (org_id, asset_id) DO UPDATE SET observed_key = GREATEST(f.observed_key, EXCLUDED.observed_key)
             ), counts AS (
               UPDATE tracking.positions p SET history_count = p.history_count - per.n
                 FROM per WHERE p.org_id = $1 AND p.asset_id = per.asset_id
             )
             SELECT (SELECT max(asset_id) FROM a) AS last, (SELECT count(*) FROM a)::int AS scanned,
                    (SELECT COALESCE(sum(n), 0) FROM per)::text AS removed`,
            [org.id, after, ASSETS_PER_BATCH, org.days],
          );
          const batch = rows[0]!;
          if (batch.last === null) break;
          after = batch.last;
          assets += batch.scanned;
          const n = Number(batch.removed);
          removed += n;
          if (n > 0) {
            metrics?.historyRowsRemoved.inc(n);
            logger.debug({ org_id: org.id, assets, removed }, "history retention in progress");
          }
          const rest = retentionPauseMs(performance.now() - started, dutyPercent);
          if (rest > 0) await pause(rest);
        }
        if (removed > 0) logger.info({ org_id: org.id, retention_days: org.days, assets, removed }, "history older than the retention removed");
        total += removed;
        if (options.stopping?.()) break;
      }
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [LOCK]);
    }
  } finally {
    client.release();
  }
  return total;
}

/** Runs a pass every `everyMs` (and once at start). */
export function startHistoryRetention(deps: {
  pool: pg.Pool;
  logger: Logger;
  metrics?: Metrics;
  everyMs: number;
  dutyPercent: number;
}): Worker & { runNow(): Promise<number> } {
  // Passes never overlap: the periodic ones and runNow's queue on one chain.
  let running: Promise<number> = Promise.resolve(0);
  // A paced pass may be long: stop ends it between two batches.
  let stopping = false;
  const pass = () =>
    (running = running.then(() =>
      retireHistory(deps.pool, deps.logger, deps.metrics, { dutyPercent: deps.dutyPercent, stopping: () => stopping }).catch((err: unknown) => {
        deps.logger.warn({ err }, "history retention failed; the next pass retries");
        return 0;
      }),
    ));
  const periodic = startPeriodic({ everyMs: deps.everyMs, ref: true, round: async () => void (await pass()), onError: () => undefined });
  return {
    runNow: pass,
    async stop() {
      stopping = true;
      await periodic.stop();
      await running;
    },
  };
}
