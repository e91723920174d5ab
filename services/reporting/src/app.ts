/** Composition root of the reporting service: wires its dependencies by hand. */
import { jetstreamManager } from "@nats-io/jetstream";
import {
  createConsistencyGate,
  createMetrics,
  openServiceDatabase,
  startService,
  type Logger,
  type Metrics,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { createEventFeed, startEventRetention } from "./events/event-feed.ts";
import { eventHandlers } from "./handlers/event-handlers.ts";
import { reportHandlers } from "./handlers/report-handler.ts";
import { REPORTING_CONSUMERS, startStreamConsumers } from "./handlers/stream-consumers.ts";
import { createReportService } from "./report/report-service.ts";
import { createReportStore } from "./report/report-store.ts";
import { startRollupTransitions } from "./summary/rollup-transitions.ts";
import { createSummaryService } from "./summary/summary-service.ts";
import { startWebhookDispatcher } from "./webhooks/dispatcher.ts";
import { startAlertWorker } from "./alerts/alert-service.ts";
import { createTargetGuard } from "./webhooks/target-guard.ts";
import { createWebhookService } from "./webhooks/webhook-service.ts";

export interface ReportingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
  /** Read-your-writes bound: longest wait for the consumers before 503 (default 2000 ms). */
  catchUpTimeoutMs?: number;
  dbPoolMax?: number;
  /** RPC, consumer and pool metrics; default: a registry of its own. */
  metrics?: Metrics;
  /** Partner events and webhooks (EXTENSIONS.md section 4). */
  events?: {
    retentionS?: number;
    allowPrivateTargets?: boolean;
    concurrency?: number;
    perTarget?: number;
    timeoutMs?: number;
    /** How often retention runs (default every minute). */
    retentionEveryMs?: number;
    /** How often due zone and asset alerts are looked for (default 500 ms). */
    alertPollMs?: number;
  };
  /** How often the location summary's due validity boundaries are applied (default every second). */
  rollupEveryMs?: number;
}

export async function startReporting(deps: ReportingDeps): Promise<RunningService> {
  const metrics = deps.metrics ?? createMetrics({ service: "reporting" });
  // Not prepared: reporting-db.ts says why.
  const database = openServiceDatabase({ schema: "reporting", url: deps.databaseUrl, max: deps.dbPoolMax ?? 10, metrics, logger: deps.logger, prepare: false });
  const { pool, sql: db } = database;
  const jsm = await jetstreamManager(deps.nc);
  const events = deps.events ?? {};
  const guard = createTargetGuard(events.allowPrivateTargets ?? false);
  const dispatcher = startWebhookDispatcher({
    pool,
    guard,
    logger: deps.logger.child({ worker: "webhooks" }),
    metrics,
    concurrency: events.concurrency,
    perTarget: events.perTarget,
    timeoutMs: events.timeoutMs,
  });
  const workers = await startStreamConsumers(deps.nc, db, deps.logger, metrics, { queued: () => dispatcher.poke() });
  const catalog = createConsistencyGate({
    jsm,
    stream: REPORTING_CONSUMERS.catalog.stream,
    durable: REPORTING_CONSUMERS.catalog.durable,
    timeoutMs: deps.catchUpTimeoutMs ?? 2000,
  });
  const service = createReportService({ db, store: createReportStore(), catalog });
  const retentionS = events.retentionS ?? 7 * 24 * 3600;
  const feed = createEventFeed({ db, catalog, retentionS });
  const webhooks = createWebhookService({ db, guard, queued: () => dispatcher.poke() });
  return startService({
    name: "reporting",
    nc: deps.nc,
    logger: deps.logger,
    handlers: { ...reportHandlers(service, createSummaryService({ db, catalog })), ...eventHandlers(feed, webhooks) },
    // On stop the dispatcher lets its requests in flight finish and records them.
    workers: [
      ...workers,
      dispatcher,
      startAlertWorker({ db, logger: deps.logger.child({ worker: "alerts" }), metrics, pollMs: events.alertPollMs, queued: () => dispatcher.poke() }),
      startEventRetention({ db, retentionS, logger: deps.logger, everyMs: events.retentionEveryMs }),
      startRollupTransitions({ db, logger: deps.logger.child({ worker: "rollup-transitions" }), everyMs: deps.rollupEveryMs }),
      database.maintenance,
    ],
    close: [database.close],
    metrics,
    readinessChecks: { database: database.ping },
  });
}
