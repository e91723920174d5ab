/**
 * Reporting's stream consumers, declared in one place. Both durables are
 * unfiltered: read-your-writes waits for their ack floor to reach the stream's
 * last sequence, which only works when every sequence passes through them.
 * Each batch commits in one transaction (after the shared swap lock) and is
 * acked after the commit; an unparsable message is dead-lettered and logged.
 * The partner events of the batch (events/partner-events.ts) and its zone and
 * asset alerts (alerts/alert-service.ts) are recorded in the same transaction.
 */
import {
  CATALOG_CONSUMER_BATCH_BYTES,
  CATALOG_CONSUMER_PULL,
  TRACKING_CONSUMER_BATCH_BYTES,
  TRACKING_CONSUMER_PULL,
  SCAN_DATA_LINGER_MS,
  DURABLES,
  phaseTimer,
  runAsLeader,
  runBatchConsumer,
  STREAMS,
  type ConsumerSpec,
  type BatchSettlement,
  type JsMsg,
  type Logger,
  type Metrics,
  type NatsConnection,
  type Worker,
} from "@whereabouts/shared";
import { ProjectionBatch, PoisonMessageError, type StreamKind } from "../projection/projection-service.ts";
import { createProjectionStore, LIVE_SCHEMA } from "../projection/projection-store.ts";
import { PartnerEventBatch, recordPartnerEvents } from "../events/partner-events.ts";
import { applyAlerts, lockAlertBatch } from "../alerts/alert-service.ts";
import { takeSwapLockShared, TX_OPTIONS, type ReportingDb } from "../reporting-db.ts";

const common = {
  ackWaitMs: 30_000,
  // Never skip an event: a batch that fails (database down) is retried until it
  // succeeds. Poison is recognised by parsing and terminated explicitly.
  maxDeliver: -1,
  batchSize: 500,
} as const;

export const REPORTING_CONSUMERS: Record<StreamKind, ConsumerSpec> = {
  // A bulk job's batch messages carry hundreds of events each: batches are bounded by bytes too.
  catalog: { stream: STREAMS.CATALOG.name, durable: DURABLES.reportingCatalog, ...common, maxBatchBytes: CATALOG_CONSUMER_BATCH_BYTES, pullMessages: CATALOG_CONSUMER_PULL },
  // A positions message carries up to a thousand positions: batches and what is pulled are bounded by bytes too.
  tracking: {
    stream: STREAMS.TRACKING.name,
    durable: DURABLES.reportingTracking,
    ...common,
    maxBatchBytes: TRACKING_CONSUMER_BATCH_BYTES,
    pullMessages: TRACKING_CONSUMER_PULL,
    lingerMs: SCAN_DATA_LINGER_MS,
  },
};

/** Partner events ride along each batch's transaction; `queued` hears of new webhook deliveries after the commit. */
export interface PartnerEventHooks {
  queued: (deliveries: number) => void;
}

export function createBatchHandler(
  kind: StreamKind,
  db: ReportingDb,
  logger: Logger,
  partners?: PartnerEventHooks,
  metrics?: Metrics,
) {
  const store = createProjectionStore(LIVE_SCHEMA);
  return async (messages: JsMsg[], settle: BatchSettlement): Promise<void> => {
    const batch = new ProjectionBatch();
    const poison = new Map<JsMsg, string>();
    for (const msg of messages) {
      try {
        batch.add(kind, msg.subject, msg.data);
      } catch (err) {
        if (!(err instanceof PoisonMessageError)) throw err;
        logger.error({ err, stream: msg.info.stream, seq: msg.seq, subject: msg.subject }, "unusable event");
        poison.set(msg, err.message);
      }
    }
    if (batch.size > 0 || batch.catalogEvents.length > 0) {
      const { timings, lap, totalMs } = phaseTimer();
      const deliveries = await db.$transaction(async (tx) => {
        await takeSwapLockShared(tx);
        if (partners) await lockAlertBatch(tx, batch);
        lap("lock_ms");
        await batch.apply(tx, store);
        lap("apply_ms");
        if (!partners) return 0;
        const partnerDeliveries = await recordPartnerEvents(tx, PartnerEventBatch.of(batch));
        lap("partner_ms");
        // Zones and alerts judge what the read model just applied (live path only: never the rebuild).
        const alertDeliveries = await applyAlerts(tx, batch, metrics);
        lap("alerts_ms");
        return partnerDeliveries + alertDeliveries;
      }, TX_OPTIONS);
      lap("commit_ms");
      if (deliveries > 0) partners?.queued(deliveries);
      logger.debug({ size: messages.length, events: batch.events, deliveries, ...timings, total_ms: totalMs() }, "projection batch committed");
    }
    for (const msg of messages) {
      const reason = poison.get(msg);
      if (reason === undefined) msg.ack();
      else await settle.deadLetter(msg, "malformed_event", reason);
    }
  };
}

/**
 * The consumers run on one replica at a time (runAsLeader): the partner feed
 * numbers events as they commit, so batches of two replicas committing
 * interleaved would reorder an asset's events in the feed and its webhooks.
 * The other replicas serve reads and send webhooks, and take over within
 * seconds when the leader goes.
 */
export async function startStreamConsumers(
  nc: NatsConnection,
  db: ReportingDb,
  logger: Logger,
  metrics?: Metrics,
  partners?: PartnerEventHooks,
): Promise<Worker[]> {
  const leader = await runAsLeader({
    pool: db.pool,
    lock: "whereabouts:reporting:stream-consumers",
    logger,
    start: () =>
      Promise.all(
        (Object.keys(REPORTING_CONSUMERS) as StreamKind[]).map((kind) =>
          runBatchConsumer({
            nc,
            spec: REPORTING_CONSUMERS[kind],
            handle: createBatchHandler(kind, db, logger.child({ consumer: REPORTING_CONSUMERS[kind].durable }), partners, metrics),
            logger,
            metrics,
          }),
        ),
      ),
  });
  return [leader];
}
