/**
 * Asset positions from tracking: a durable pull consumer of the TRACKING
 * stream's position messages (`asset.positions` batches, or the per-asset
 * `asset.moved` form) sets the assets' location columns from the moves, newer
 * ones only. Positions are scan data: reads never wait for this consumer
 * (ARCHITECTURE.md rule 4); they show what it has applied.
 */
import { setImmediate } from "node:timers/promises";
import {
  decodeJson,
  DURABLES,
  parseInstant,
  positionEventsOf,
  runBatchConsumer,
  STREAMS,
  TRACKING_CONSUMER_BATCH_BYTES,
  TRACKING_CONSUMER_PULL,
  SCAN_DATA_LINGER_MS,
  type AssetPositionEvent,
  type ConsumerSpec,
  type BatchSettlement,
  type JsMsg,
  type Logger,
  type Metrics,
  type NatsConnection,
  type Worker,
} from "@whereabouts/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { applyPositions } from "../assets/asset-store.ts";
import type { CatalogClient } from "../db/catalog-db.ts";

export const POSITION_CONSUMER: ConsumerSpec = {
  stream: STREAMS.TRACKING.name,
  durable: DURABLES.catalogTracking,
  // One filter (nats-server 2.9 takes no list): sightings are published outside it (`sightings.positions`),
  // and the older per-asset `asset.seen` messages are read and skipped.
  filterSubjects: ["tracking.events.*.asset.*"],
  ackWaitMs: 30_000,
  maxDeliver: 20,
  batchSize: 1000,
  // A positions message carries up to a thousand positions: bounded by bytes too (memory).
  maxBatchBytes: TRACKING_CONSUMER_BATCH_BYTES,
  pullMessages: TRACKING_CONSUMER_PULL,
  lingerMs: SCAN_DATA_LINGER_MS,
};

/** The unfiltered durable of earlier versions: nobody reads it, so it would hold every message forever. */
const RETIRED_DURABLE = "catalog-tracking";

export async function startPositionConsumer(deps: {
  nc: NatsConnection;
  db: CatalogClient;
  logger: Logger;
  metrics?: Metrics;
  /** After each batch committed: the organizations whose assets it may have moved. */
  onMoved?: (orgIds: Set<number>) => void;
}): Promise<Worker> {
  const { db, logger } = deps;
  const jsm = await jetstreamManager(deps.nc);
  await jsm.consumers.delete(POSITION_CONSUMER.stream, RETIRED_DURABLE).catch(() => false);
  return runBatchConsumer({ nc: deps.nc, spec: POSITION_CONSUMER, handle: positionBatchHandler(db, deps.onMoved), logger, metrics: deps.metrics });
}

/**
 * One batch of position messages: the moves of every well-formed message in
 * one statement, then their acks; a malformed message is dead-lettered.
 */
export function positionBatchHandler(db: CatalogClient, onMoved?: (orgIds: Set<number>) => void) {
  return async (messages: JsMsg[], settle: BatchSettlement): Promise<void> => {
    const events: AssetPositionEvent[] = [];
    const applied: JsMsg[] = [];
    for (const [i, msg] of messages.entries()) {
      // A positions message takes 2-3 ms to decode and check (1,000 items) and a batch
      // holds up to 4 MiB of them: between messages, requests waiting on this process
      // (API reads) go first.
      if (i > 0) await setImmediate();
      let parsed;
      try {
        parsed = positionEventsOf(msg.subject, decodeJson(msg.data));
      } catch {
        parsed = undefined;
      }
      if (!parsed || parsed.some((e) => !parseInstant(e.observed_at))) {
        // Poison: never retried, never blocks the stream, kept on DEAD_LETTERS.
        await settle.deadLetter(msg, "malformed_event", parsed ? "observed_at is not an instant" : "not an asset position event");
        continue;
      }
      for (const event of parsed) if (event.verb === "moved") events.push(event);
      applied.push(msg);
    }
    await applyPositions(db, events);
    if (events.length) onMoved?.(new Set(events.map((e) => e.org_id)));
    for (const msg of applied) msg.ack();
  };
}
