/** Reporting process entry: config, ops server, connections, signals. */
import { bindDeploymentOrExit, connectNats, createLogger, createMetrics, ensureStreams, onShutdownSignal, startOpsServer } from "@whereabouts/shared";
import { startReporting } from "./app.ts";
import { loadReportingConfig } from "./config.ts";

const config = loadReportingConfig();
const logger = createLogger("reporting", config.LOG_LEVEL);
const metrics = createMetrics({ service: "reporting", processMetrics: true });
// Up first, so the startup probe sees a live process; /readyz stays 503 until the service runs.
const ops = await startOpsServer({ port: config.OPS_PORT, metrics, logger });
const nc = await connectNats({ url: config.NATS_URL, name: "reporting", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// Streams are idempotent to ensure; whichever service boots first creates them.
// Streams of another deployment (a stack on another database) are refused before anything touches them.
await bindDeploymentOrExit({ nc, databaseUrl: config.databaseUrl, schema: "reporting", logger, replicas: config.NATS_STREAM_REPLICAS });
await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
const service = await startReporting({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  catchUpTimeoutMs: config.REPORT_CATCHUP_TIMEOUT_MS,
  dbPoolMax: config.REPORTING_DB_POOL_MAX,
  metrics,
  events: {
    retentionS: config.EVENT_RETENTION_S,
    allowPrivateTargets: config.WEBHOOK_ALLOW_PRIVATE,
    concurrency: config.WEBHOOK_CONCURRENCY,
    perTarget: config.WEBHOOK_TARGET_CONCURRENCY,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  },
});
ops.setReadiness(service.readiness);
logger.info("reporting ready");
onShutdownSignal(logger, async () => {
  await service.stop(); // not ready from here on; ops stays up for the probes until the end
  await ops.close();
});
