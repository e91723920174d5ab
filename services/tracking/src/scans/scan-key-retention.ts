/**
 * Retention of the idempotency keys of scans published without an event_id
 * (`s:<stream seq>:<timestamp ns>`, scan-parser.ts). Such a key only guards
 * against the stream delivering its message again. Its message can no longer
 * be delivered once it is both acknowledged (at or below the scan durable's
 * ack floor) and gone from SCANS (below the stream's first sequence, after its
 * 7-day age limit): a durable created anew delivers the whole stream again, so
 * the ack floor alone is not enough. Those keys are deleted. `e:<event_id>`
 * keys stay (a client may send an event again at any time).
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import { startPeriodic, type Logger, type Worker } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";

/** How often the keys are pruned. */
const PRUNE_EVERY_MS = 10 * 60_000;
/** Keys read per statement. */
const PRUNE_BATCH = 5000;

/**
 * Deletes the stream-sequence keys at or below `through`; returns how many.
 * Walks each organization's `s:` keys once, in key order, by the primary key
 * (a cursor, not a rescan from the start: the deleted entries stay in the
 * index until vacuumed).
 */
export async function pruneStreamKeys(db: Db, through: number, batch = PRUNE_BATCH): Promise<number> {
  const orgs = await query<{ id: number }>(db, `SELECT id FROM tracking.orgs ORDER BY id`);
  let total = 0;
  for (const { id } of orgs) {
    let after = "s:";
    for (;;) {
      const rows = await query<{ last: string | null; removed: number }>(
        db,
        `WITH scanned AS (
           SELECT key FROM tracking.scan_keys WHERE org_id = $1 AND key > $2 AND key < 's;' ORDER BY key LIMIT $4
         ), gone AS (
           DELETE FROM tracking.scan_keys k USING scanned s
            WHERE k.org_id = $1 AND k.key = s.key AND split_part(s.key, ':', 2)::bigint <= $3
           RETURNING 1
         )
         SELECT (SELECT max(key) FROM scanned) AS last, (SELECT count(*) FROM gone)::int AS removed`,
        [id, after, through, batch],
      );
      total += rows[0]!.removed;
      if (rows[0]!.last === null) break;
      after = rows[0]!.last;
    }
  }
  return total;
}

/** The stream sequence through which no message of the scan durable can be delivered again (0: none). */
export async function undeliverableThrough(jsm: JetStreamManager, stream: string, durable: string): Promise<number> {
  const [consumer, info] = await Promise.all([jsm.consumers.info(stream, durable), jsm.streams.info(stream)]);
  return Math.max(0, Math.min(consumer.ack_floor.stream_seq, info.state.first_seq - 1));
}

/** The periodic prune: how far no scan can come again (undeliverableThrough), then the keys through there. */
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
