/**
 * Tracking's JetStream consumers, declared in one place: stream, durable,
 * filter, ack wait, delivery limit, batch size.
 */
import { CATALOG_CONSUMER_BATCH_BYTES, CATALOG_CONSUMER_PULL, DURABLES, STREAMS, type ConsumerSpec } from "@whereabouts/shared";

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
