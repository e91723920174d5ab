import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "@whereabouts/shared/testing";
import { createMemoryRateLimiter, createRedisRateLimiter, type RateLimiter } from "./rate-limiter.ts";

const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";

function clock(start: number) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** The fixed-window contract both stores must keep. */
function contract(name: string, make: (now: () => number) => RateLimiter) {
  describe(name, () => {
    const limiters: RateLimiter[] = [];
    afterAll(async () => {
      for (const l of limiters) await l.close();
    });
    const build = (now: () => number) => {
      const limiter = make(now);
      limiters.push(limiter);
      return limiter;
    };

    it("counts per bucket within a window, then refuses", async () => {
      const c = clock(10_000_000);
      const limiter = build(c.now);
      const results = [];
      for (let i = 0; i < 4; i++) results.push(await limiter.hit("key:1", 3));
      expect(results.map((r) => [r.allowed, r.remaining, r.limit])).toEqual([
        [true, 2, 3],
        [true, 1, 3],
        [true, 0, 3],
        [false, 0, 3],
      ]);
      expect((await limiter.hit("key:2", 3)).remaining).toBe(2);
    });

    it("reports the time to the end of the window and starts afresh after it", async () => {
      const c = clock(20_000_000 + 250);
      const limiter = build(c.now);
      const first = await limiter.hit("key:1", 1);
      expect(first.resetMs).toBe(1000 - 250);
      expect((await limiter.hit("key:1", 1)).allowed).toBe(false);
      c.advance(750);
      const next = await limiter.hit("key:1", 1);
      expect(next).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 });
    });

    it("each hit may carry its own limit (per-key override)", async () => {
      const c = clock(30_000_000);
      const limiter = build(c.now);
      for (let i = 0; i < 5; i++) expect((await limiter.hit("key:9", 5)).allowed).toBe(true);
      expect((await limiter.hit("key:9", 5)).allowed).toBe(false);
      expect((await limiter.hit("key:9", 10)).allowed).toBe(true);
    });
  });
}

contract("memory rate limiter", (now) => createMemoryRateLimiter(1000, now));
contract("redis rate limiter", (now) =>
  createRedisRateLimiter(new Redis(REDIS_URL), 1000, { now, prefix: `test:rl:${randomBytes(6).toString("hex")}` }),
);

describe("redis rate limiter, shared and failing", () => {
  it("two limiters on one prefix share the count; another prefix does not", async () => {
    const prefix = `test:rl:${randomBytes(6).toString("hex")}`;
    const a = createRedisRateLimiter(new Redis(REDIS_URL), 60_000, { prefix });
    const b = createRedisRateLimiter(new Redis(REDIS_URL), 60_000, { prefix });
    const other = createRedisRateLimiter(new Redis(REDIS_URL), 60_000, { prefix: `${prefix}:other` });
    try {
      expect((await a.hit("key:1", 2)).remaining).toBe(1);
      expect((await b.hit("key:1", 2)).remaining).toBe(0);
      expect((await a.hit("key:1", 2)).allowed).toBe(false);
      expect((await other.hit("key:1", 2)).remaining).toBe(1);
    } finally {
      await Promise.all([a.close(), b.close(), other.close()]);
    }
  });

  it("fails open to in-process counting when Redis is unreachable, reporting it once", async () => {
    const port = await freePort();
    const redis = new Redis({ host: "127.0.0.1", port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on("error", () => undefined);
    const errors: unknown[] = [];
    const limiter = createRedisRateLimiter(redis, 60_000, { onError: (err) => errors.push(err) });
    try {
      expect(await limiter.hit("key:1", 2)).toMatchObject({ allowed: true, remaining: 1 });
      expect(await limiter.hit("key:1", 2)).toMatchObject({ allowed: true, remaining: 0 });
      expect(await limiter.hit("key:1", 2)).toMatchObject({ allowed: false });
      expect(errors).toHaveLength(1);
    } finally {
      await limiter.close();
    }
  });
});
