/** Reporting process entry: config, connections, signals. */
import { connectNats, createLogger, onShutdownSignal } from "@whereabouts/shared";
import { startReporting } from "./app.ts";
import { loadReportingConfig } from "./config.ts";

const config = loadReportingConfig();
const logger = createLogger("reporting", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "reporting", logger });
const service = await startReporting({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  catchUpTimeoutMs: config.REPORT_CATCHUP_TIMEOUT_MS,
  dbPoolMax: config.REPORTING_DB_POOL_MAX,
});
logger.info("reporting ready");
onShutdownSignal(logger, service.stop);
