/** Tracking process entry: config, ops server, connections, signals. */
import { bindDeploymentOrExit, connectNats, createLogger, createMetrics, ensureStreams, onShutdownSignal, startOpsServer } from "@whereabouts/shared";
import { startTracking } from "./app.ts";
import { loadTrackingConfig } from "./config.ts";

const config = loadTrackingConfig();
const logger = createLogger("tracking", config.LOG_LEVEL);
const metrics = createMetrics({ service: "tracking", processMetrics: true });
// Up first, so the startup probe sees a live process; /readyz stays 503 until the service runs.
const ops = await startOpsServer({ port: config.OPS_PORT, metrics, logger });
const nc = await connectNats({ url: config.NATS_URL, name: "tracking", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// The streams it consumes (SCANS, CATALOG) and publishes to (TRACKING, SCANS_DLQ), idempotently.
// Streams of another deployment (a stack on another database) are refused before anything touches them.
await bindDeploymentOrExit({ nc, databaseUrl: config.databaseUrl, schema: "tracking", logger, replicas: config.NATS_STREAM_REPLICAS });
await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
const service = await startTracking({ nc, logger, databaseUrl: config.databaseUrl, options: config.options, metrics });
ops.setReadiness(service.readiness);
logger.info("tracking ready");
onShutdownSignal(logger, async () => {
  await service.stop(); // not ready from here on; ops stays up for the probes until the end
  await ops.close();
});
