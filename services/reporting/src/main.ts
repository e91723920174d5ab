/** Reporting process entry: config, connections, signals. */
import { connectNats, createLogger, ensureStreams, onShutdownSignal } from "@whereabouts/shared";
import { startReporting } from "./app.ts";
import { loadReportingConfig } from "./config.ts";

const config = loadReportingConfig();
const logger = createLogger("reporting", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "reporting", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// Streams are idempotent to ensure; whichever service boots first creates them.
await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
const service = await startReporting({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  catchUpTimeoutMs: config.REPORT_CATCHUP_TIMEOUT_MS,
  dbPoolMax: config.REPORTING_DB_POOL_MAX,
});
logger.info("reporting ready");
onShutdownSignal(logger, service.stop);
