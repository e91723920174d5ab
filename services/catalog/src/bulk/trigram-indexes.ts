/**
 * The `q` search's trigram GIN indexes during a bulk job. They run with a
 * small pending list (migration 20270101000000: TRIGRAM_PENDING_LIST_KB,
 * merged by the insert that fills it, so a search scans at most a few pending
 * pages per index). A 100,000-row job would fill and merge it again and again:
 * a large job raises the limit to Postgres's default (4 MB) for its own
 * duration (new entries are merged in larger sorted batches) and, when no other job still writes,
 * puts the small limit back and merges what is pending. Searches stay correct
 * throughout (GIN scans its pending list); a crash that leaves the large
 * limit is put right by the next job or worker start.
 */
import { sqlExecute, sqlQueryOne, sqlTransaction, type Logger, type Pool } from "@whereabouts/shared";
import { JOB_LEASE_MS } from "./job-store.ts";

/** The trigram indexes a bulk job writes (assets' name, key, description; tags' value). */
export const BULK_TRIGRAM_INDEXES = [
  "catalog.assets_name_trgm_idx",
  "catalog.assets_external_key_trgm_idx",
  "catalog.assets_description_trgm_idx",
  "catalog.tags_value_trgm_idx",
] as const;

/** New rows at or above which a job defers the trigram index maintenance. */
export const DEFER_INDEXES_AFTER_ROWS = 1000;

/** The pending list's limit, kB: always (see the migration), and while a large job writes. */
export const TRIGRAM_PENDING_LIST_KB = 64;
export const BULK_PENDING_LIST_KB = 4096;
/** The indexes' reloptions outside a job, as pg_class shows them. */
export const TRIGRAM_INDEX_OPTIONS = ["fastupdate=on", `gin_pending_list_limit=${TRIGRAM_PENDING_LIST_KB}`];

/**
 * ALTER INDEX takes an ACCESS EXCLUSIVE lock on the index: never wait behind
 * (or hold up) a long search for it; an index that cannot have it stays as it is.
 */
const LOCK_TIMEOUT = "2s";

/**
 * Each index in a transaction of its own: holding one index's lock while
 * waiting for the next deadlocked with any query that had planned on both
 * tables (the job's own validation, a search), and one of the two was killed.
 * Throws the first failure, after trying every index.
 */
async function setPendingListLimit(db: Pool, kb: number): Promise<void> {
  let failure: unknown;
  for (const index of BULK_TRIGRAM_INDEXES) {
    try {
      await sqlTransaction(db, async (tx) => {
        await sqlExecute(tx, `SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
        await sqlExecute(tx, `ALTER INDEX ${index} SET (fastupdate = on, gin_pending_list_limit = ${kb})`);
      });
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure !== undefined) throw failure;
}

/**
 * Before a large job writes: entries wait in a large pending list. Best effort (the
 * job is only slower without); returns whether the indexes need restoring
 * after the job (some may have been switched even when others could not).
 */
export async function deferTrigramIndexes(db: Pool, logger: Logger): Promise<boolean> {
  try {
    await setPendingListLimit(db, BULK_PENDING_LIST_KB);
  } catch (err) {
    logger.warn({ err }, "bulk upload: could not defer every trigram index; those left merge their small pending list more often");
  }
  return true;
}

/**
 * After a job (committed or not): unless another job is still running (its
 * lease fresh), the indexes go back to the small pending list and what is
 * pending is merged, so searches no longer scan it. Returns whether it restored them.
 */
export async function restoreTrigramIndexes(db: Pool, logger: Logger, jobId?: number): Promise<boolean> {
  const other = await sqlQueryOne<{ id: number }>(
    db,
    `SELECT id FROM catalog.jobs
      WHERE status = 'running' AND id <> $1 AND heartbeat_at >= now() - make_interval(secs => $2::int / 1000.0)
      LIMIT 1`,
    [jobId ?? 0, JOB_LEASE_MS],
  );
  if (other) return false;
  try {
    const pending = await sqlQueryOne<{ restored: boolean }>(
      db,
      `SELECT bool_and(coalesce(c.reloptions, '{}') @> $2::text[]) AS restored
         FROM pg_class c WHERE c.oid = ANY($1::regclass[])`,
      [[...BULK_TRIGRAM_INDEXES], TRIGRAM_INDEX_OPTIONS],
    );
    if (pending?.restored) return true;
    // The small limit first: what other writers add from now on is merged at that size; then what is pending is merged.
    await setPendingListLimit(db, TRIGRAM_PENDING_LIST_KB);
    for (const index of BULK_TRIGRAM_INDEXES) await sqlExecute(db, `SELECT gin_clean_pending_list($1::regclass)`, [index]);
    return true;
  } catch (err) {
    logger.warn({ err }, "bulk upload: could not restore the trigram indexes; the next job tries again");
    return false;
  }
}
