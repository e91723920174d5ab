/**
 * Tracking's JetStream consumers, declared in one place: stream, durable,
 * filter, ack wait, delivery limit, batch size.
 */
import { CATALOG_CONSUMER_BATCH_BYTES, CATALOG_CONSUMER_PULL, DURABLES, SCAN_DATA_LINGER_MS, STREAMS, type ConsumerSpec } from "@whereabouts/shared";

/** Bytes of scan messages per batch: some 8,000 tag reads of the largest scans. */
export const SCAN_CONSUMER_BATCH_BYTES = 512 * 1024;

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
  // Ordinary scans (a few hundred bytes) still fill the count first.
  maxBatchBytes: SCAN_CONSUMER_BATCH_BYTES,
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
