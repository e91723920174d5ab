/**
 * The roll-up's validity boundaries (location_rollup_transitions, see the
 * migration 20261210000000_location_rollups): nothing is written when an
 * asset's valid_from or valid_to passes, so this loop applies the due rows to
 * their location's assets_effective and deletes them. Every replica runs it:
 * rows are claimed FOR UPDATE SKIP LOCKED, so replicas share the work and never
 * apply a row twice. A summary may therefore lag a validity boundary by about
 * the loop's period (1 s by default).
 */
import { isLockConflict, startPeriodic, type Logger, type Worker } from "@whereabouts/shared";
import { takeSwapLockShared, TX_OPTIONS, type ReportingDb } from "../reporting-db.ts";

/**
 * The claim: due rows oldest first, walked through the `at` index. `at` goes
 * out as text (a JS Date would drop its microseconds, and the key would no
 * longer match), so the order names the column (`t.at`): ordered by the
 * output's text alias, no index could give the order and every due row was
 * sorted for each batch.
 */
export const CLAIM_DUE_TRANSITIONS = `SELECT t.org_id, t.asset_id, t.at::text AS at FROM reporting.location_rollup_transitions t
        WHERE t.at <= now() ORDER BY t.at LIMIT $1 FOR UPDATE SKIP LOCKED`;

/**
 * Planner settings for the claim only (set, then put back, in its
 * transaction): the table is empty one moment and holds a backlog the next,
 * so its statistics are nearly always stale, and on an estimate of a few
 * hundred rows the planner read and sorted all 200,100 due rows (95-160 ms a
 * batch, sorted on disk) where the walk takes 2 ms.
 */
export const CLAIM_PLANNER_SETTINGS = ["enable_seqscan", "enable_bitmapscan", "enable_sort"] as const;
const settingsTo = (value: "on" | "off") => CLAIM_PLANNER_SETTINGS.map((name) => `set_config('${name}', '${value}', true)`).join(", ");

/**
 * One batch: claims up to `batchSize` due rows, oldest first, deletes them
 * and adds their deltas to the counters (in key order, as the triggers do).
 * Returns how many were applied. A short lock timeout: a projection batch that
 * already holds a counter row and then waits for a row claimed here would
 * otherwise deadlock with it; this side gives way and the next round retries.
 */
export async function applyDueTransitions(db: ReportingDb, batchSize: number): Promise<number> {
  return db.$transaction(async (tx) => {
    // The rebuild's swap renames the tables: no batch straddles it.
    await takeSwapLockShared(tx);
    await tx.$queryRawUnsafe(`SELECT set_config('lock_timeout', '200ms', true), ${settingsTo("off")}`);
    const due = await tx.$queryRawUnsafe<Array<{ org_id: number; asset_id: number; at: string }>>(CLAIM_DUE_TRANSITIONS, batchSize);
    await tx.$queryRawUnsafe(`SELECT ${settingsTo("on")}`);
    if (!due.length) return 0;
    // A new statement: it reads the claimed rows as they are now (a move may
    // have carried one to another location just before it was claimed).
    const [applied] = await tx.$queryRawUnsafe<Array<{ n: number }>>(
      `WITH gone AS (
         DELETE FROM reporting.location_rollup_transitions t
          USING unnest($1::int[], $2::int[], $3::timestamptz[]) AS d(org_id, asset_id, at)
          WHERE t.org_id = d.org_id AND t.asset_id = d.asset_id AND t.at = d.at
         RETURNING t.org_id, t.location_id, t.delta),
       counted AS (
         INSERT INTO reporting.location_rollups AS r (org_id, location_id, assets_effective)
         SELECT org_id, location_id, sum(delta) FROM gone
          GROUP BY org_id, location_id
          ORDER BY org_id, location_id
         ON CONFLICT (org_id, location_id) DO UPDATE SET assets_effective = r.assets_effective + EXCLUDED.assets_effective
         RETURNING 1)
       SELECT (SELECT count(*) FROM gone)::int AS n, (SELECT count(*) FROM counted)::int AS locations`,
      due.map((d) => d.org_id),
      due.map((d) => d.asset_id),
      due.map((d) => d.at),
    );
    return applied?.n ?? 0;
  }, TX_OPTIONS);
}


export function startRollupTransitions(deps: { db: ReportingDb; logger: Logger; everyMs?: number; batchSize?: number }): Worker {
  const everyMs = deps.everyMs ?? 1000;
  const batchSize = deps.batchSize ?? 1000;
  return startPeriodic({
    everyMs,
    ref: true,
    round: async (stopping) => {
      let total = 0;
      // Batch after batch while full, so a backlog (the service was down) drains
      // without waiting a period per batch and without one long transaction.
      for (;;) {
        const applied = await applyDueTransitions(deps.db, batchSize);
        total += applied;
        if (applied < batchSize || stopping()) break;
      }
      if (total > 0) deps.logger.debug({ applied: total }, "roll-up validity boundaries applied");
    },
    onError: (err) => {
      if (isLockConflict(err)) deps.logger.debug({ err }, "roll-up boundaries gave way to a projection batch; next round retries");
      else deps.logger.warn({ err }, "roll-up boundaries failed; next round retries");
    },
  });
}
