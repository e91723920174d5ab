/** Composition root of the reporting service: wires its dependencies by hand. */
import { jetstreamManager } from "@nats-io/jetstream";
import {
  createConsistencyGate,
  createMetrics,
  createPool,
  startDbMaintenance,
  startService,
  type Logger,
  type Metrics,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { reportHandlers } from "./handlers/report-handler.ts";
import { REPORTING_CONSUMERS, startStreamConsumers } from "./handlers/stream-consumers.ts";
import { createReportService } from "./report/report-service.ts";
import { createReportStore } from "./report/report-store.ts";
import { createReportingDb } from "./reporting-db.ts";

export interface ReportingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
  /** Read-your-writes bound: longest wait for the consumers before 503 (default 2000 ms). */
  catchUpTimeoutMs?: number;
  dbPoolMax?: number;
  /** RPC, consumer and pool metrics; default: a registry of its own. */
  metrics?: Metrics;
}

export async function startReporting(deps: ReportingDeps): Promise<RunningService> {
  const metrics = deps.metrics ?? createMetrics({ service: "reporting" });
  const pool = createPool(deps.databaseUrl, deps.dbPoolMax ?? 10);
  const db = createReportingDb(pool);
  const unwatchPool = metrics.watchPool("reporting", pool);
  const jsm = await jetstreamManager(deps.nc);
  const workers = await startStreamConsumers(deps.nc, db, deps.logger, metrics);
  const service = createReportService({
    db,
    store: createReportStore(),
    catalog: createConsistencyGate({
      jsm,
      stream: REPORTING_CONSUMERS.catalog.stream,
      durable: REPORTING_CONSUMERS.catalog.durable,
      timeoutMs: deps.catchUpTimeoutMs ?? 2000,
    }),
  });
  return startService({
    name: "reporting",
    nc: deps.nc,
    logger: deps.logger,
    handlers: reportHandlers(service),
    workers: [...workers, startDbMaintenance({ pool, schema: "reporting", logger: deps.logger })],
    close: [async () => unwatchPool(), () => db.$disconnect()],
    metrics,
    readinessChecks: { database: () => db.$queryRawUnsafe("SELECT 1") },
  });
}
