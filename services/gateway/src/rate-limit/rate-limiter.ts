/**
 * Fixed-window rate limiting per key. In-process by default; with Redis the
 * counts are shared by every gateway replica (INCR + PEXPIRE per window).
 */
import type { Redis } from "ioredis";

export interface RateLimitResult {
  limit: number;
  remaining: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
  allowed: boolean;
}

export interface RateLimiter {
  hit(bucket: string, limit: number): Promise<RateLimitResult>;
  close(): Promise<void>;
}

function result(count: number, limit: number, resetMs: number): RateLimitResult {
  return { limit, remaining: Math.max(0, limit - count), resetMs, allowed: count <= limit };
}

export function createMemoryRateLimiter(windowMs: number, now = () => Date.now()): RateLimiter {
  const counts = new Map<string, { window: number; count: number }>();
  return {
    async hit(bucket, limit) {
      const t = now();
      const window = Math.floor(t / windowMs);
      const entry = counts.get(bucket);
      const current = entry && entry.window === window ? entry : { window, count: 0 };
      current.count++;
      counts.set(bucket, current);
      if (counts.size > 100_000) {
        for (const [k, v] of counts) if (v.window !== window) counts.delete(k);
      }
      return result(current.count, limit, (window + 1) * windowMs - t);
    },
    async close() {},
  };
}

export interface RedisRateLimiterOptions {
  /** Namespace of the counters, so several deployments can share one Redis. */
  prefix?: string;
  now?: () => number;
  /** Told when Redis starts failing; the hit is then counted in process (fail open). */
  onError?: (err: unknown) => void;
}

export function createRedisRateLimiter(redis: Redis, windowMs: number, options: RedisRateLimiterOptions = {}): RateLimiter {
  const now = options.now ?? (() => Date.now());
  const prefix = options.prefix ?? "whereabouts:rl";
  // Redis down must not take the API down with it: count locally meanwhile.
  const fallback = createMemoryRateLimiter(windowMs, now);
  let failing = false;
  return {
    async hit(bucket, limit) {
      const t = now();
      const window = Math.floor(t / windowMs);
      const key = `${prefix}:${bucket}:${window}`;
      try {
        const replies = await redis.multi().incr(key).pexpire(key, windowMs + 1000).exec();
        const [err, count] = replies?.[0] ?? [new Error("empty MULTI reply"), undefined];
        if (err) throw err;
        failing = false;
        return result(Number(count), limit, (window + 1) * windowMs - t);
      } catch (err) {
        if (!failing) options.onError?.(err);
        failing = true;
        return fallback.hit(bucket, limit);
      }
    },
    async close() {
      redis.disconnect();
    },
  };
}
