/** Catalog process entry: config, connections, signals. */
import { connectNats, createLogger, ensureStreams, onShutdownSignal } from "@whereabouts/shared";
import { startCatalog } from "./app.ts";
import { loadCatalogConfig } from "./config.ts";

const config = loadCatalogConfig();
const logger = createLogger("catalog", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "catalog", logger });
// The streams it publishes to (CATALOG) and consumes (TRACKING), idempotently.
await ensureStreams(nc);
const service = await startCatalog({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  relayIntervalMs: config.CATALOG_RELAY_INTERVAL_MS,
  catchUpTimeoutMs: config.CATALOG_CATCH_UP_TIMEOUT_MS,
});
logger.info("catalog ready");
onShutdownSignal(logger, service.stop);
