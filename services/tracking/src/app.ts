/** Composition root of the tracking service: wires its dependencies by hand. */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  DURABLES,
  runBatchConsumer,
  startService,
  STREAMS,
  waitForConsumer,
  type Logger,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { runIsolated } from "./db/batch-isolation.ts";
import { createTrackingClient } from "./db/tracking-db.ts";
import { historyListHandler } from "./handlers/history-handler.ts";
import { metricsHandler } from "./handlers/metrics-handler.ts";
import { catalogConsumerSpec, scanConsumerSpec } from "./handlers/stream-consumers.ts";
import { createHistoryService } from "./history/history-service.ts";
import { createReplicaService, prepareCatalogConsumer } from "./replica/replica-service.ts";
import { createScanService } from "./scans/scan-service.ts";

export interface TrackingOptions {
  scanBatchSize: number;
  scanAckWaitMs: number;
  catalogBatchSize: number;
  catchUpTimeoutMs: number;
  dbPoolSize: number;
}

export const DEFAULT_TRACKING_OPTIONS: TrackingOptions = {
  scanBatchSize: 500,
  scanAckWaitMs: 30_000,
  catalogBatchSize: 256,
  catchUpTimeoutMs: 3000,
  dbPoolSize: 10,
};

export interface TrackingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
  options?: Partial<TrackingOptions>;
}

export async function startTracking(deps: TrackingDeps): Promise<RunningService> {
  const { nc, logger } = deps;
  const options = { ...DEFAULT_TRACKING_OPTIONS, ...deps.options };
  const db = createTrackingClient(deps.databaseUrl, options.dbPoolSize);
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const catchUp = () =>
    waitForConsumer(jsm, STREAMS.CATALOG.name, DURABLES.trackingCatalog, options.catchUpTimeoutMs);

  const replica = createReplicaService({ db, logger });
  const catalogSpec = catalogConsumerSpec({ batchSize: options.catalogBatchSize, ackWaitMs: 30_000 });
  await prepareCatalogConsumer({ db, jsm, spec: catalogSpec, logger });
  const catalogWorker = await runBatchConsumer({
    nc,
    spec: catalogSpec,
    logger,
    handle: (messages) =>
      runIsolated({
        messages,
        process: replica.applyMessages,
        reject: async (msg, err) => replica.rejectMessage(msg, err),
        db,
        logger,
      }),
  });

  const scans = createScanService({ db, js, catchUp, logger });
  const scanWorker = await runBatchConsumer({
    nc,
    spec: scanConsumerSpec({ batchSize: options.scanBatchSize, ackWaitMs: options.scanAckWaitMs }),
    logger,
    handle: scans.handleBatch,
  });

  const history = createHistoryService({ db, catchUp });
  return startService({
    name: "tracking",
    nc,
    logger,
    handlers: {
      "history.list": historyListHandler(history),
      metrics: metricsHandler({ scans: scans.metrics, replica: replica.metrics }),
    },
    workers: [scanWorker, catalogWorker],
    close: [() => db.$disconnect()],
  });
}
