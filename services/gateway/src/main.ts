/** Gateway process entry: config, dependencies, listen, graceful shutdown. */
import { Redis } from "ioredis";
import { connectNats, createLogger, onShutdownSignal } from "@whereabouts/shared";
import { buildGateway } from "./app.ts";
import { loadGatewayConfig } from "./config.ts";
import { createAuthService } from "./identity/auth-service.ts";
import { createIdentityClient, createIdentityStore } from "./identity/identity-store.ts";
import { createMemoryRateLimiter, createRedisRateLimiter } from "./plugins/rate-limiter.ts";

const config = loadGatewayConfig();
const logger = createLogger("gateway", config.LOG_LEVEL);
const db = createIdentityClient(config.identityDatabaseUrl);
const identity = createIdentityStore(db);
const nc = await connectNats({ url: config.NATS_URL, name: "gateway", logger, user: config.NATS_USER, pass: config.NATS_PASSWORD });
const rateLimiter = config.REDIS_URL
  ? createRedisRateLimiter(new Redis(config.REDIS_URL, { maxRetriesPerRequest: 2 }), config.RATE_LIMIT_WINDOW_MS, {
      onError: (err) => logger.warn({ err }, "rate limit store unavailable; counting in process"),
    })
  : createMemoryRateLimiter(config.RATE_LIMIT_WINDOW_MS);

const app = await buildGateway({
  logger,
  nc,
  auth: createAuthService(identity),
  identity,
  rateLimiter,
  rateLimit: { max: config.RATE_LIMIT_MAX, windowMs: config.RATE_LIMIT_WINDOW_MS },
  rpcTimeoutMs: config.RPC_TIMEOUT_MS,
  readyTimeoutMs: config.READY_TIMEOUT_MS,
});
await app.listen({ host: config.HOST, port: config.PORT });

onShutdownSignal(logger, async () => {
  await app.close(); // stops accepting, waits for in-flight requests
  await nc.drain();
  await rateLimiter.close();
  await db.$disconnect();
});
