/** Catalog process entry: config, connections, signals. */
import { connectNats, createLogger, onShutdownSignal } from "@whereabouts/shared";
import { startCatalog } from "./app.ts";
import { loadCatalogConfig } from "./config.ts";

const config = loadCatalogConfig();
const logger = createLogger("catalog", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "catalog", logger });
const service = await startCatalog({ nc, logger, databaseUrl: config.databaseUrl });
logger.info("catalog ready");
onShutdownSignal(logger, service.stop);
