/**
 * Reporting's stream consumers, declared in one place. Both durables are
 * unfiltered: read-your-writes waits for their ack floor to reach the stream's
 * last sequence, which only works when every sequence passes through them.
 * Each batch commits in one transaction (after the shared swap lock) and is
 * acked after the commit; an unparsable message is terminated and logged.
 */
import {
  DURABLES,
  runBatchConsumer,
  STREAMS,
  type ConsumerSpec,
  type JsMsg,
  type Logger,
  type Metrics,
  type NatsConnection,
  type Worker,
} from "@whereabouts/shared";
import { ProjectionBatch, PoisonMessageError, type StreamKind } from "../projection/projection-service.ts";
import { createProjectionStore, LIVE_SCHEMA } from "../projection/projection-store.ts";
import { takeSwapLockShared, TX_OPTIONS, type ReportingDb } from "../reporting-db.ts";

const common = {
  ackWaitMs: 30_000,
  // Never skip an event: a batch that fails (database down) is retried until it
  // succeeds. Poison is recognised by parsing and terminated explicitly.
  maxDeliver: -1,
  batchSize: 500,
} as const;

export const REPORTING_CONSUMERS: Record<StreamKind, ConsumerSpec> = {
  catalog: { stream: STREAMS.CATALOG.name, durable: DURABLES.reportingCatalog, ...common },
  tracking: { stream: STREAMS.TRACKING.name, durable: DURABLES.reportingTracking, ...common },
};

export function createBatchHandler(kind: StreamKind, db: ReportingDb, logger: Logger) {
  const store = createProjectionStore(LIVE_SCHEMA);
  return async (messages: JsMsg[]): Promise<void> => {
    const batch = new ProjectionBatch();
    const poison = new Set<JsMsg>();
    for (const msg of messages) {
      try {
        batch.add(kind, msg.subject, msg.data);
      } catch (err) {
        if (!(err instanceof PoisonMessageError)) throw err;
        logger.error({ err, stream: msg.info.stream, seq: msg.seq, subject: msg.subject }, "unusable event terminated");
        poison.add(msg);
      }
    }
    if (batch.size > 0) {
      await db.$transaction(async (tx) => {
        await takeSwapLockShared(tx);
        await batch.apply(tx, store);
      }, TX_OPTIONS);
    }
    for (const msg of messages) {
      // No reason text: nats-server 2.9 does not parse "+TERM <reason>".
      if (poison.has(msg)) msg.term();
      else msg.ack();
    }
  };
}

export async function startStreamConsumers(nc: NatsConnection, db: ReportingDb, logger: Logger, metrics?: Metrics): Promise<Worker[]> {
  return Promise.all(
    (Object.keys(REPORTING_CONSUMERS) as StreamKind[]).map((kind) =>
      runBatchConsumer({
        nc,
        spec: REPORTING_CONSUMERS[kind],
        handle: createBatchHandler(kind, db, logger.child({ consumer: REPORTING_CONSUMERS[kind].durable })),
        logger,
        metrics,
      }),
    ),
  );
}
