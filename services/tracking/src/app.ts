/** Composition root of the tracking service: wires its dependencies by hand. */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  createConsistencyGate,
  createMetrics,
  openServiceDatabase,
  DURABLES,
  runBatchConsumer,
  startService,
  STREAMS,
  waitForConsumer,
  type Logger,
  type Metrics,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { runIsolated } from "./db/batch-isolation.ts";
import { scanStatusHandler } from "./handlers/scan-status-handler.ts";
import { historyListHandler } from "./handlers/history-handler.ts";
import { metricsHandler, startCounterLog } from "./handlers/metrics-handler.ts";
import { catalogConsumerSpec, scanConsumerSpec } from "./handlers/stream-consumers.ts";
import { DEFAULT_TRACKING_OPTIONS, type TrackingOptions } from "./config.ts";
import { createHistoryService } from "./history/history-service.ts";
import { createReplicaService, prepareCatalogConsumer } from "./replica/replica-service.ts";
import { createPositionPublisher } from "./scans/position-publisher.ts";
import { createScanCounters } from "./scans/scan-metrics.ts";
import { createScanService } from "./scans/scan-service.ts";
import { startScanKeyRetention, undeliverableThrough } from "./scans/scan-key-retention.ts";
import { startHistoryRetention } from "./history/history-retention.ts";

export interface TrackingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
  options?: Partial<TrackingOptions>;
  /** RPC, consumer, pool and ingestion metrics; default: a registry of its own. */
  metrics?: Metrics;
}

export async function startTracking(deps: TrackingDeps): Promise<RunningService> {
  const { nc, logger } = deps;
  const options = { ...DEFAULT_TRACKING_OPTIONS, ...deps.options };
  const metrics = deps.metrics ?? createMetrics({ service: "tracking" });
  const database = openServiceDatabase({ schema: "tracking", url: deps.databaseUrl, max: options.dbPoolSize, metrics, logger });
  const { pool, sql: db } = database;
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const catchUp = () =>
    waitForConsumer(jsm, STREAMS.CATALOG.name, DURABLES.trackingCatalog, options.catchUpTimeoutMs);

  const replica = createReplicaService({ db, logger });
  const catalogSpec = catalogConsumerSpec({ batchSize: options.catalogBatchSize, ackWaitMs: options.catalogAckWaitMs });
  await prepareCatalogConsumer({ db, jsm, spec: catalogSpec, logger });
  const catalogWorker = await runBatchConsumer({
    nc,
    spec: catalogSpec,
    logger,
    metrics,
    handle: (messages, settle) =>
      runIsolated({
        messages,
        process: (batch) => replica.applyMessages(batch, settle),
        reject: (msg, err) => replica.rejectMessage(msg, err, settle),
        db,
        logger,
      }),
  });

  const positions = createPositionPublisher(nc, { ackTimeoutMs: 10_000 });
  const scans = createScanService({ db, js, positions, catchUp, logger, counters: createScanCounters(metrics) });
  const scanSpec = scanConsumerSpec({ batchSize: options.scanBatchSize, ackWaitMs: options.scanAckWaitMs });
  const scanWorker = await runBatchConsumer({
    nc,
    spec: scanSpec,
    logger,
    metrics,
    handle: scans.handleBatch,
  });

  const history = createHistoryService({
    db,
    catalog: createConsistencyGate({
      jsm,
      stream: STREAMS.CATALOG.name,
      durable: DURABLES.trackingCatalog,
      timeoutMs: options.catchUpTimeoutMs,
    }),
  });
  const counters = { scans: scans.metrics, replica: replica.metrics };
  const summary = startCounterLog(logger, counters, options.metricsLogIntervalMs);
  return startService({
    name: "tracking",
    nc,
    logger,
    handlers: {
      "history.list": historyListHandler(history),
      "scan.status": scanStatusHandler(db),
      metrics: metricsHandler(counters),
    },
    workers: [
      // Stop fetching, finish the batch in hand, then its announce/ack step.
      {
        stop: async () => {
          await scanWorker.stop();
          await scans.drain();
          positions.close();
        },
      },
      catalogWorker,
      summary,
      startHistoryRetention({ pool, logger, metrics, everyMs: options.retentionIntervalMs, dutyPercent: options.retentionDutyPercent }),
      startScanKeyRetention({ db, logger, through: () => undeliverableThrough(jsm, scanSpec.stream, scanSpec.durable) }),
      database.maintenance,
    ],
    close: [database.close],
    metrics,
    readinessChecks: { database: database.ping },
  });
}
