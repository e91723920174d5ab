/**
 * Asset positions from tracking: a durable pull consumer on the TRACKING stream
 * applies `asset.moved` events to the assets' location columns (newer only), and
 * reads that show a position first catch up with it (read-your-writes).
 */
import {
  AssetPositionEvent,
  decodeJson,
  DURABLES,
  parseInstant,
  runBatchConsumer,
  STREAMS,
  waitForConsumer,
  type ConsumerSpec,
  type JsMsg,
  type Logger,
  type Metrics,
  type NatsConnection,
  type Worker,
} from "@whereabouts/shared";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { applyPosition } from "../assets/asset-store.ts";
import { inTransaction, type CatalogClient } from "../db/catalog-db.ts";

/**
 * Unfiltered, so the ack floor passes every stream sequence and
 * `waitForConsumer` can tell when the catalog has caught up.
 */
export const POSITION_CONSUMER: ConsumerSpec = {
  stream: STREAMS.TRACKING.name,
  durable: DURABLES.catalogTracking,
  ackWaitMs: 30_000,
  maxDeliver: 20,
  batchSize: 200,
};

const MOVED = /^tracking\.events\.\d+\.asset\.moved$/;

export async function startPositionConsumer(deps: {
  nc: NatsConnection;
  db: CatalogClient;
  logger: Logger;
  metrics?: Metrics;
}): Promise<Worker> {
  const { db, logger } = deps;
  const handle = async (messages: JsMsg[]) => {
    const events: AssetPositionEvent[] = [];
    const skipped: JsMsg[] = [];
    const applied: JsMsg[] = [];
    for (const msg of messages) {
      if (!MOVED.test(msg.subject)) {
        skipped.push(msg);
        continue;
      }
      let parsed;
      try {
        parsed = AssetPositionEvent.safeParse(decodeJson(msg.data));
      } catch {
        parsed = undefined;
      }
      if (!parsed?.success || !parseInstant(parsed.data.observed_at)) {
        // Poison: never retried, never blocks the stream.
        logger.error({ subject: msg.subject, seq: msg.seq }, "malformed asset position event dropped");
        msg.term();
        continue;
      }
      events.push(parsed.data);
      applied.push(msg);
    }
    if (events.length) {
      await inTransaction(db, async (tx) => {
        for (const event of events) await applyPosition(tx, event);
      });
    }
    for (const msg of [...applied, ...skipped]) msg.ack();
  };
  return runBatchConsumer({ nc: deps.nc, spec: POSITION_CONSUMER, handle, logger, metrics: deps.metrics });
}

export interface PositionCatchUp {
  /** Waits until every position event published so far is applied (503 on timeout). */
  catchUp(): Promise<void>;
}

export async function createPositionCatchUp(nc: NatsConnection, timeoutMs: number): Promise<PositionCatchUp> {
  const jsm: JetStreamManager = await jetstreamManager(nc);
  return {
    catchUp: () => waitForConsumer(jsm, POSITION_CONSUMER.stream, POSITION_CONSUMER.durable, timeoutMs),
  };
}
