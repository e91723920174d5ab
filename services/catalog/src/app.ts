/** Composition root of the catalog service: wires its dependencies by hand. */
import {
  createAckedPublisher,
  createMetrics,
  announceCatalogWrite,
  createPool,
  openServiceDatabase,
  startService,
  type Logger,
  type Metrics,
  openUploads,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { createAssetService } from "./assets/asset-service.ts";
import { createEventPublisher, type PublishFn } from "./events/event-outbox.ts";
import { startOutboxRetention } from "./events/outbox-retention.ts";
import { assetHandlers } from "./handlers/asset-handlers.ts";
import { locationHandlers } from "./handlers/location-handlers.ts";
import { handheldHandlers } from "./handlers/handheld-handlers.ts";
import { bulkHandlers } from "./handlers/bulk-handlers.ts";
import { startJobWorker, type BulkHooks } from "./bulk/bulk-import.ts";
import { settingsHandlers } from "./handlers/settings-handlers.ts";
import { createSettingsService } from "./settings/settings-service.ts";
import { startPositionConsumer } from "./handlers/position-consumer.ts";
import { createLocationService } from "./locations/location-service.ts";
import { createTagService } from "./tags/tag-service.ts";
import { scanPointHandlers } from "./handlers/scan-point-handlers.ts";
import { createScanPointService } from "./scan-points/scan-point-service.ts";

export interface CatalogDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
  /** Sends one catalog event to JetStream; defaults to the shared light publisher with its Nats-Msg-Id. */
  publish?: PublishFn;
  /** How often the outbox relay looks for unpublished events (default 5 s). */
  relayIntervalMs?: number;
  poolSize?: number;
  /** RPC, consumer, outbox and pool metrics; default: a registry of its own. */
  metrics?: Metrics;
  /** Hooks into running bulk jobs (tests stop the service at a known point). */
  bulkHooks?: BulkHooks;
}

/** How long an event's publish waits for JetStream's acknowledgement (js.publish's default); then the relay retries. */
const PUBLISH_ACK_TIMEOUT_MS = 5000;

/** JetStream publish-with-ack through the shared light publisher (`js.publish` cost 13% of the catalog's CPU while creating assets). */
export function jetStreamPublisher(nc: NatsConnection): PublishFn {
  const publisher = createAckedPublisher(nc, { ackTimeoutMs: PUBLISH_ACK_TIMEOUT_MS });
  return (subject, payload, msgId) => publisher.publish(subject, payload, msgId);
}

export async function startCatalog(deps: CatalogDeps): Promise<RunningService> {
  const { nc, logger } = deps;
  const metrics = deps.metrics ?? createMetrics({ service: "catalog" });
  const database = openServiceDatabase({ schema: "catalog", url: deps.databaseUrl, max: deps.poolSize ?? 10, metrics, logger });
  const db = database.pool;
  const events = createEventPublisher({
    db,
    publish: deps.publish ?? jetStreamPublisher(nc),
    announce: (orgId, seq) => announceCatalogWrite(nc, orgId, seq),
    logger,
    relayIntervalMs: deps.relayIntervalMs ?? 5000,
  });
  const unwatchOutbox = metrics.watchOutbox("catalog", () => events.backlog());
  const assets = createAssetService({ events, db });
  const consumer = await startPositionConsumer({ nc, db, logger, metrics, onMoved: (orgIds) => assets.positionsMoved(orgIds) });
  // Whatever a previous run committed but did not publish goes out first.
  await events.start();
  const outboxRetention = startOutboxRetention({ db, logger });

  const uploads = await openUploads(nc);
  // Bulk jobs write on a pipelined connection of their own (BulkDeps.writer).
  const bulkWriter = createPool(deps.databaseUrl, 1, { pipeline: true });
  const jobs = startJobWorker({ db, writer: bulkWriter, events, store: uploads, logger, ...(deps.bulkHooks ? { hooks: deps.bulkHooks } : {}) });
  const locations = createLocationService({ events, db });
  const tags = createTagService({ events });
  const settings = createSettingsService({ db, events });
  const scanPoints = createScanPointService({ db, events });

  return startService({
    name: "catalog",
    nc,
    logger,
    handlers: {
      ...assetHandlers({ assets, tags }),
      ...locationHandlers({ locations, tags }),
      ...handheldHandlers({ db }),
      ...settingsHandlers(settings),
      ...scanPointHandlers(scanPoints),
      ...bulkHandlers({ db, store: async () => uploads, jobQueued: () => jobs.poke() }),
    },
    workers: [consumer, jobs, { stop: () => events.stop() }, outboxRetention, database.maintenance],
    close: [async () => unwatchOutbox(), database.close, () => bulkWriter.end()],
    metrics,
    readinessChecks: { database: database.ping },
  });
}
