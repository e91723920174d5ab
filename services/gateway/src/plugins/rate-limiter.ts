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

export function createRedisRateLimiter(redis: Redis, windowMs: number, now = () => Date.now()): RateLimiter {
  return {
    async hit(bucket, limit) {
      const t = now();
      const window = Math.floor(t / windowMs);
      const key = `whereabouts:rl:${bucket}:${window}`;
      const replies = await redis.multi().incr(key).pexpire(key, windowMs + 1000).exec();
      const count = Number(replies?.[0]?.[1] ?? 1);
      return result(count, limit, (window + 1) * windowMs - t);
    },
    async close() {
      redis.disconnect();
    },
  };
}
