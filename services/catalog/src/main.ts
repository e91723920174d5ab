/** Catalog process entry: config, connections, signals. */
import { connectNats, createLogger, ensureStreams, onShutdownSignal } from "@whereabouts/shared";
import { startCatalog } from "./app.ts";
import { loadCatalogConfig } from "./config.ts";

const config = loadCatalogConfig();
const logger = createLogger("catalog", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "catalog", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// The streams it publishes to (CATALOG) and consumes (TRACKING), idempotently.
await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
const service = await startCatalog({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  relayIntervalMs: config.CATALOG_RELAY_INTERVAL_MS,
  catchUpTimeoutMs: config.CATALOG_CATCH_UP_TIMEOUT_MS,
});
logger.info("catalog ready");
onShutdownSignal(logger, service.stop);
