/** Gateway process entry: config, dependencies, listen; the shared process runner does ops server, NATS, signals. */
import { Redis } from "ioredis";
import {
  drainNats,
  natsConnected,
  runReadinessChecks,
  watchCatalogWrites,
  openServiceDatabase,
  runServiceProcess,
} from "@whereabouts/shared";
import { jetstreamManager } from "@nats-io/jetstream";
import { buildGateway } from "./app.ts";
import { loadGatewayConfig } from "./config.ts";
import { createAuthService } from "./identity/auth-service.ts";
import { createIdentityStore } from "./identity/identity-store.ts";
import { createMemoryRateLimiter, createRedisRateLimiter } from "./rate-limit/rate-limiter.ts";

const config = loadGatewayConfig();
// A gateway of another deployment would send its requests to that stack's services: the runner checks the binding.
await runServiceProcess({
  name: "gateway",
  config: { ...config, databaseUrl: config.identityDatabaseUrl },
  schema: "identity",
  ensureStreams: false,
  // Each HTTP request arrives in an I/O callback of its own: its NATS request was a socket write of its own.
  coalesceNatsWrites: true,
  async start({ nc, logger, metrics }) {
    const database = openServiceDatabase({ schema: "identity", url: config.identityDatabaseUrl, max: 10, metrics, logger });
    const identity = createIdentityStore(database.sql);
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
    return {
      readiness: async () =>
        stopping
          ? { ready: false, checks: { stopping: false } }
          : runReadinessChecks({ nats: () => natsConnected(nc), database: database.ping }),
      async stop() {
        stopping = true;
        await app.close(); // stops accepting, waits for in-flight requests
        await drainNats(nc);
        await rateLimiter.close();
        await database.maintenance.stop();
        await database.close();
      },
    };
  },
});
