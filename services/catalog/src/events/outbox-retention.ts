/**
 * Retention of the outbox: a row is only needed until its event is published
 * (the relay republishes what is not); published rows are kept a day for
 * inspection after an incident, then deleted, so the table does not grow with
 * every write the catalog ever took.
 */
import { startPeriodic, type Logger, type Worker } from "@whereabouts/shared";
import { execute, type CatalogClient } from "../db/catalog-db.ts";

/** How long a published outbox row is kept. */
export const PUBLISHED_OUTBOX_KEEP_S = 24 * 3600;
/** How often the purge runs (each replica; concurrent purges only wait on each other's rows). */
const PURGE_EVERY_MS = 10 * 60_000;
/** Rows read per statement. */
const PURGE_BATCH = 5000;

/**
 * Deletes the outbox rows published more than `keepS` seconds ago, oldest
 * first; returns how many. Each statement reads the `batch` oldest rows by
 * the primary key (ids follow time) and deletes those published long enough
 * ago; one that deletes nothing ends the round (the oldest rows are recent,
 * or not published yet), so a round reads at most one batch of the rows it keeps.
 */
export async function purgePublishedOutbox(db: CatalogClient, keepS: number, batch = PURGE_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const removed = await execute(
      db,
      `WITH oldest AS (SELECT id, published_at FROM catalog.outbox_events ORDER BY id LIMIT $2)
       DELETE FROM catalog.outbox_events o USING oldest
        WHERE o.id = oldest.id AND oldest.published_at < now() - make_interval(secs => $1)`,
      [keepS, batch],
    );
    total += removed;
    if (removed === 0) return total;
  }
}

/** The periodic purge, first a minute after start. */
export function startOutboxRetention(deps: {
  db: CatalogClient;
  logger: Logger;
  keepS?: number;
  everyMs?: number;
  firstAfterMs?: number;
}): Worker {
  const keepS = deps.keepS ?? PUBLISHED_OUTBOX_KEEP_S;
  return startPeriodic({
    everyMs: deps.everyMs ?? PURGE_EVERY_MS,
    firstAfterMs: deps.firstAfterMs ?? 60_000,
    round: async () => {
      const removed = await purgePublishedOutbox(deps.db, keepS);
      if (removed) deps.logger.info({ removed, keep_s: keepS }, "published outbox rows removed");
    },
    onError: (err) => deps.logger.warn({ err }, "outbox retention failed; the next round retries"),
  });
}
