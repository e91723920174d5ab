/** Catalog process entry: config, ops server, connections, signals. */
import { bindDeploymentOrExit, connectNats, createLogger, createMetrics, ensureStreams, onShutdownSignal, startOpsServer } from "@whereabouts/shared";
import { startCatalog } from "./app.ts";
import { loadCatalogConfig } from "./config.ts";

const config = loadCatalogConfig();
const logger = createLogger("catalog", config.LOG_LEVEL);
const metrics = createMetrics({ service: "catalog", processMetrics: true });
// Up first, so the startup probe sees a live process; /readyz stays 503 until the service runs.
const ops = await startOpsServer({ port: config.OPS_PORT, metrics, logger });
const nc = await connectNats({ url: config.NATS_URL, name: "catalog", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// The streams it publishes to (CATALOG) and consumes (TRACKING), idempotently.
// Streams of another deployment (a stack on another database) are refused before anything touches them.
await bindDeploymentOrExit({ nc, databaseUrl: config.databaseUrl, schema: "catalog", logger, replicas: config.NATS_STREAM_REPLICAS });
await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
const service = await startCatalog({
  nc,
  logger,
  databaseUrl: config.databaseUrl,
  relayIntervalMs: config.CATALOG_RELAY_INTERVAL_MS,
  metrics,
});
ops.setReadiness(service.readiness);
logger.info("catalog ready");
onShutdownSignal(logger, async () => {
  await service.stop(); // not ready from here on; ops stays up for the probes until the end
  await ops.close();
});
