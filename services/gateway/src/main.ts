/** Gateway process entry: config, dependencies, ops server, listen, graceful shutdown. */
import { Redis } from "ioredis";
import {
  bindDeploymentOrExit,
  connectNats,
  createLogger,
  createMetrics,
  createPool,
  drainNats,
  natsConnected,
  onShutdownSignal,
  runReadinessChecks,
  startDbMaintenance,
  startOpsServer,
  watchCatalogWrites,
} from "@whereabouts/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { buildGateway } from "./app.ts";
import { loadGatewayConfig } from "./config.ts";
import { createAuthService } from "./identity/auth-service.ts";
import { createIdentityClient, createIdentityStore } from "./identity/identity-store.ts";
import { createMemoryRateLimiter, createRedisRateLimiter } from "./rate-limit/rate-limiter.ts";

const config = loadGatewayConfig();
const logger = createLogger("gateway", config.LOG_LEVEL);
const metrics = createMetrics({ service: "gateway", processMetrics: true });
// Up first, so the startup probe sees a live process; /readyz stays 503 until the end of boot.
const ops = await startOpsServer({ port: config.OPS_PORT, metrics, logger });
const pool = createPool(config.identityDatabaseUrl, 10);
metrics.watchPool("identity", pool);
const db = createIdentityClient(pool);
const identity = createIdentityStore(db);
const maintenance = startDbMaintenance({ pool, schema: "identity", logger });
const nc = await connectNats({ url: config.NATS_URL, name: "gateway", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
// A gateway of another deployment would send its requests to that stack's services.
await bindDeploymentOrExit({ nc, databaseUrl: config.identityDatabaseUrl, schema: "identity", logger, replicas: config.NATS_STREAM_REPLICAS });
const rateLimiter = config.REDIS_URL
  ? createRedisRateLimiter(new Redis(config.REDIS_URL, { maxRetriesPerRequest: 2 }), config.RATE_LIMIT_WINDOW_MS, {
      onError: (err) => logger.warn({ err }, "rate limit store unavailable; counting in process"),
    })
  : createMemoryRateLimiter(config.RATE_LIMIT_WINDOW_MS);

const watermarks = await watchCatalogWrites(nc, await jetstreamManager(nc));
const app = await buildGateway({
  logger,
  nc,
  auth: createAuthService(identity),
  identity,
  rateLimiter,
  rateLimit: { max: config.RATE_LIMIT_MAX, windowMs: config.RATE_LIMIT_WINDOW_MS },
  rpcTimeoutMs: config.RPC_TIMEOUT_MS,
  readyTimeoutMs: config.READY_TIMEOUT_MS,
  watermarks,
  metrics,
  handheld: { sessionTtlS: config.SESSION_TTL_S, cookieSecure: config.COOKIE_SECURE },
});
await app.listen({ host: config.HOST, port: config.PORT });

// The ops /readyz: this replica can serve (NATS and its database). The API's
// /readyz also pings every backend service.
let stopping = false;
ops.setReadiness(async () =>
  stopping
    ? { ready: false, checks: { stopping: false } }
    : runReadinessChecks({ nats: () => natsConnected(nc), database: () => db.$queryRawUnsafe("SELECT 1") }),
);

onShutdownSignal(logger, async () => {
  stopping = true;
  await app.close(); // stops accepting, waits for in-flight requests
  await drainNats(nc);
  await rateLimiter.close();
  await maintenance.stop();
  await db.$disconnect();
  await ops.close();
});
