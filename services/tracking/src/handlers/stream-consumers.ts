/**
 * Tracking's JetStream consumers, declared in one place: stream, durable,
 * filter, ack wait, delivery limit, batch size.
 */
import { CATALOG_CONSUMER_BATCH_BYTES, CATALOG_CONSUMER_PULL, DURABLES, SCAN_DATA_LINGER_MS, STREAMS, type ConsumerSpec } from "@whereabouts/shared";

/**
 * Scan messages per batch (TRACKING_SCAN_BATCH_SIZE's default). A batch only
 * grows this large when scans wait (a backlog: the linger otherwise starts a
 * batch with what has come), and then it is what makes ingest fast: each
 * asset's position, its position event and everything downstream of that
 * (reporting's row, catalog's move, a partner event) are written once per
 * batch however often the asset was read in it, and a batch's fixed costs
 * (catch-up, resolution, a transaction) are paid once. 500-event batches
 * (5,000 reads) wrote 88% of their reads as position changes over 20,000
 * assets, 5,000-event batches 37%. Alternated, 500,000 reads over 20,000
 * assets (before history rows went in passes, scan-store.ts): steady 13,497 -> 21,494 / 20,604 reads/s (stack CPU 124 -> 74 / 77
 * ms per 1,000 reads), churn 8,208 -> 14,673 / 14,312 (199 -> 109 / 115 ms).
 * 8,000 with SCAN_CONSUMER_BATCH_BYTES at 4.5 MB (from 5,000 and 3 MB, which
 * steady batches filled at about 4,800): Postgres's CPU per steady read 9%
 * less, ingest beside retention's deletes 10% (docs/performance.md, sessions 27-28). Its
 * memory: tracking's peak RSS stays where 5,000 had it with a smaller young
 * generation (TRACKING_SEMI_SPACE_MB, node-flags.ts). 10,000 and 6.5 MB
 * (session 29) took another 10% off the stack's CPU per steady read (a
 * position for 0.20 of a batch's reads instead of 0.27), but tracking's peak
 * RSS reached 235 and 247 MB in full benchmark runs (the 250 MB target):
 * left out.
 */
export const DEFAULT_SCAN_BATCH_SIZE = 8000;

/**
 * Bytes of scan messages per batch. Scans of 10 tags (about 650 B) fill it at
 * some 7,200 messages, before the count; scans of a thousand tags (40-60 kB
 * each) stop at 75-110 of them, 75,000-110,000 reads.
 */
export const SCAN_CONSUMER_BATCH_BYTES = 4.5 * 1024 * 1024;

/**
 * SCANS, shared by every tracking replica. Unfiltered: the stream is `scans.>`
 * and its `scans.dlq.` branch is skipped by the handler (a single 2.9 filter
 * cannot exclude it). No delivery limit: the handler dead-letters poison
 * itself, so JetStream never drops a scan silently.
 */
export const scanConsumerSpec = (o: { batchSize: number; ackWaitMs: number }): ConsumerSpec => ({
  stream: STREAMS.SCANS.name,
  durable: DURABLES.trackingScans,
  ackWaitMs: o.ackWaitMs,
  maxDeliver: -1,
  batchSize: o.batchSize,
  // A scan may carry up to a thousand tags (tens of kB): a batch of such scans is bounded by bytes,
  // not only by count (500 of them were 100,000 reads in one transaction, over 150 MB of heap).
  maxBatchBytes: SCAN_CONSUMER_BATCH_BYTES,
  // One batch in hand beside the one being written (not the default two): bounds memory, and how long a pulled scan
  // waits for its batch against the ack wait.
  pullMessages: o.batchSize,
  lingerMs: SCAN_DATA_LINGER_MS,
});

/** CATALOG, unfiltered so its ack floor follows the stream (catch-up waits on it). */
export const catalogConsumerSpec = (o: { batchSize: number; ackWaitMs: number }): ConsumerSpec => ({
  stream: STREAMS.CATALOG.name,
  durable: DURABLES.trackingCatalog,
  ackWaitMs: o.ackWaitMs,
  maxDeliver: -1,
  batchSize: o.batchSize,
  // A bulk job's batch messages carry hundreds of events each.
  maxBatchBytes: CATALOG_CONSUMER_BATCH_BYTES,
  pullMessages: CATALOG_CONSUMER_PULL,
});
