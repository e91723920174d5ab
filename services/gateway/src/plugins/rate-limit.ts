/**
 * The rate limit: a fixed window per bucket (the API key, the session's user,
 * or the address when unauthenticated), with the RateLimit headers on every
 * answer. An authentication error found earlier is answered here, after the
 * request was counted, so failed attempts are limited too.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError, type Metrics } from "@whereabouts/shared";
import type { RateLimiter } from "../rate-limit/rate-limiter.ts";
import { appPlugin, routeConfigOf } from "./app-plugin.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Counts the request in `bucket` (limit `max`, default the gateway's); 429 beyond it. */
    rateLimit(request: FastifyRequest, reply: FastifyReply, bucket: string, max?: number | null): Promise<void>;
    /** The rate limit of an authenticated (or refused) request, then its authentication error if any. */
    limitRequest(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  }
}

export interface RateLimitOptions {
  rateLimiter: RateLimiter;
  /** Requests per window when the key sets no limit of its own. */
  max: number;
  metrics: Pick<Metrics, "rateLimited">;
}

export const rateLimitPlugin = appPlugin<RateLimitOptions>("rate-limit", async (app, options) => {
  async function rateLimit(request: FastifyRequest, reply: FastifyReply, bucket: string, max?: number | null, authError?: unknown): Promise<void> {
    const rl = await options.rateLimiter.hit(bucket, max ?? options.max);
    const resetSeconds = Math.max(1, Math.ceil(rl.resetMs / 1000));
    reply.header("ratelimit-limit", String(rl.limit));
    reply.header("ratelimit-remaining", String(rl.remaining));
    reply.header("ratelimit-reset", String(resetSeconds));
    if (authError) {
      if (authError instanceof AppError && authError.type === "unauthorized") reply.header("www-authenticate", "Bearer");
      throw authError;
    }
    if (!rl.allowed) {
      options.metrics.rateLimited.inc({ key_id: String(request.principal?.key_id ?? "none") });
      reply.header("retry-after", String(resetSeconds));
      throw new AppError("rate_limited", `Rate limit of ${rl.limit} requests per window exceeded`);
    }
  }

  async function limitRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const counted = request.rateBucket ?? { bucket: `ip:${request.ip}`, limit: null };
    await rateLimit(request, reply, counted.bucket, counted.limit, request.authError);
  }

  app.decorate("rateLimit", (request: FastifyRequest, reply: FastifyReply, bucket: string, max?: number | null) => rateLimit(request, reply, bucket, max));
  app.decorate("limitRequest", limitRequest);

  app.addHook("onRequest", async (request, reply) => {
    if (routeConfigOf(request.routeOptions.config).open) return;
    await limitRequest(request, reply);
  });
});
