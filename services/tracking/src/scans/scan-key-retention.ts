/**
 * Retention of the idempotency keys of scans published without an event_id
 * (`s:<stream seq>:<timestamp ns>`, scan-parser.ts). Such a key only guards
 * against the stream delivering its message again, which it can no longer do
 * once the message is both acknowledged (at or below the scan durable's ack
 * floor) and gone from SCANS (below the stream's first sequence, after its
 * 7-day age limit): a durable created anew delivers the whole stream again,
 * so the ack floor alone is not enough. Those keys are deleted by their
 * `seq` column (the key's text does not sort by the sequence), one index
 * range, oldest first. `e:<event_id>` keys stay: a client may send an event
 * again at any time.
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import { startPeriodic, type Logger, type Worker } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";

/** How often the keys are pruned (each replica; concurrent prunes only wait on each other's rows). */
const PRUNE_EVERY_MS = 10 * 60_000;
/** Keys deleted per statement. */
const PRUNE_BATCH = 5000;

/**
 * Deletes the stream-sequence keys at or below `through`, `batch` at a time
 * from the lowest sequence; returns how many. Each statement goes on from the
 * sequence where the previous one ended (the entries it deleted stay in the
 * index until vacuumed; a scan from the start would read them again).
 */
export async function pruneStreamKeys(db: Db, through: number, batch = PRUNE_BATCH): Promise<number> {
  let total = 0;
  let from = 0;
  for (;;) {
    const [row] = await query<{ removed: number; last: string | null }>(
      db,
      `WITH doomed AS (
         SELECT org_id, key, seq FROM tracking.scan_keys
          WHERE seq IS NOT NULL AND seq >= $1 AND seq <= $2
          ORDER BY seq LIMIT $3
       ), gone AS (
         DELETE FROM tracking.scan_keys k USING doomed d
          WHERE k.org_id = d.org_id AND k.key = d.key
         RETURNING d.seq
       )
       SELECT count(*)::int AS removed, max(seq)::text AS last FROM gone`,
      [from, through, batch],
    );
    total += row!.removed;
    // Fewer than a batch: nothing at or below `through` is left (a key of the same
    // sequence beyond a batch's end, from a stream created anew, is read again from `last`).
    if (row!.removed < batch || row!.last === null) return total;
    from = Number(row!.last);
  }
}

/** The stream sequence through which no message of the scan durable can be delivered again (0: none). */
export async function undeliverableThrough(jsm: JetStreamManager, stream: string, durable: string): Promise<number> {
  const [consumer, info] = await Promise.all([jsm.consumers.info(stream, durable), jsm.streams.info(stream)]);
  return Math.max(0, Math.min(consumer.ack_floor.stream_seq, info.state.first_seq - 1));
}

/** The periodic prune, first a minute after start: how far no scan can come again (undeliverableThrough), then the keys through there. */
export function startScanKeyRetention(deps: {
  db: Db;
  logger: Logger;
  through: () => Promise<number>;
  everyMs?: number;
  firstAfterMs?: number;
}): Worker {
  return startPeriodic({
    everyMs: deps.everyMs ?? PRUNE_EVERY_MS,
    firstAfterMs: deps.firstAfterMs ?? 60_000,
    round: async () => {
      const through = await deps.through();
      if (through <= 0) return;
      const removed = await pruneStreamKeys(deps.db, through);
      if (removed) deps.logger.info({ removed, through_seq: through }, "scan idempotency keys of undeliverable messages removed");
    },
    onError: (err) => deps.logger.warn({ err }, "scan key retention failed; the next round retries"),
  });
}
