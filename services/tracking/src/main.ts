/** Tracking process entry: config, connections, signals. */
import { connectNats, createLogger, ensureStreams, onShutdownSignal } from "@whereabouts/shared";
import { startTracking } from "./app.ts";
import { loadTrackingConfig } from "./config.ts";

const config = loadTrackingConfig();
const logger = createLogger("tracking", config.LOG_LEVEL);
const nc = await connectNats({ url: config.NATS_URL, name: "tracking", logger });
await ensureStreams(nc);
const service = await startTracking({ nc, logger, databaseUrl: config.databaseUrl, options: config.options });
logger.info("tracking ready");
onShutdownSignal(logger, service.stop);
