/**
 * Rate limits at the gateway (spec: Limits; DECISIONS.md: Rate limits):
 * per API key, fixed window, per-key override, RateLimit-* on every response,
 * 429 with Retry-After, HEAD counted, in process by default and shared by
 * every gateway replica through Redis.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LightMyRequestResponse } from "fastify";
import { createLogger } from "@whereabouts/shared";
import { buildGateway, type Gateway } from "../services/gateway/src/app.ts";
import { createAuthService } from "../services/gateway/src/identity/auth-service.ts";
import { createRedisRateLimiter, type RateLimiter } from "../services/gateway/src/rate-limit/rate-limiter.ts";
import { fakeService, startStack, type FakeService, type Stack } from "./harness.ts";

const REDIS_URL = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
/** A day: no test here straddles a window boundary. */
const WINDOW_MS = 24 * 3600 * 1000;
const DEFAULT_MAX = 4;

let stack: Stack;
let orgId: number;
let catalog: FakeService;

beforeAll(async () => {
  stack = await startStack({ label: "gw_rate", services: [], rateLimit: { max: DEFAULT_MAX, windowMs: WINDOW_MS } });
  catalog = fakeService(stack.nc, "catalog");
  orgId = (await stack.createOrg("Rate Org")).id;
});
afterAll(async () => {
  catalog?.stop();
  await stack?.close();
});

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

function expectHeaders(res: LightMyRequestResponse, limit: number, remaining: number) {
  expect(res.headers["ratelimit-limit"]).toBe(String(limit));
  expect(res.headers["ratelimit-remaining"]).toBe(String(remaining));
  const reset = Number(res.headers["ratelimit-reset"]);
  expect(Number.isInteger(reset)).toBe(true);
  expect(reset).toBeGreaterThanOrEqual(1);
  expect(reset).toBeLessThanOrEqual(WINDOW_MS / 1000);
}

function expect429(res: LightMyRequestResponse, limit: number) {
  expect(res.statusCode).toBe(429);
  expectHeaders(res, limit, 0);
  const retryAfter = Number(res.headers["retry-after"]);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  if (res.body !== "") {
    expect(res.json().error).toMatchObject({ type: "rate_limited", title: "Rate limited", status: 429, request_id: res.headers["x-request-id"] });
  }
}

describe("in-process fixed window", () => {
  it("counts every response of a key, whatever its status, then 429 with Retry-After", async () => {
    const { key } = await stack.createKey({ org: orgId, scopes: "assets:read" });
    const requests = [
      { method: "GET", url: "/api/v1/assets" }, // 200
      { method: "GET", url: "/api/v1/assets/0" }, // 400
      { method: "POST", url: "/api/v1/assets" }, // 403 (no assets:write)
      { method: "PUT", url: "/api/v1/assets" }, // 405
    ] as const;
    for (const [i, r] of requests.entries()) {
      const res = await stack.gateway.inject({ ...r, headers: bearer(key) });
      expect(res.statusCode).not.toBe(429);
      expect(res.headers["retry-after"]).toBeUndefined();
      expectHeaders(res, DEFAULT_MAX, DEFAULT_MAX - 1 - i);
    }
    // Over the limit: 429 before routing, scopes and validation.
    for (const url of ["/api/v1/assets", "/api/v1/nowhere", "/api/v1/assets/0", "/api/v1/orgs/me"]) {
      expect429(await stack.gateway.inject({ method: "GET", url, headers: bearer(key) }), DEFAULT_MAX);
    }
  });

  it("HEAD counts toward the limit and its 429 has no body", async () => {
    const { key } = await stack.createKey({ org: orgId, scopes: "all" });
    for (let i = 0; i < DEFAULT_MAX; i++) {
      const res = await stack.gateway.inject({ method: "HEAD", url: "/api/v1/orgs/me", headers: bearer(key) });
      expect(res.statusCode).toBe(200);
      expectHeaders(res, DEFAULT_MAX, DEFAULT_MAX - 1 - i);
    }
    expect429(await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(key) }), DEFAULT_MAX);
    const head = await stack.gateway.inject({ method: "HEAD", url: "/api/v1/orgs/me", headers: bearer(key) });
    expect429(head, DEFAULT_MAX);
    expect(head.body).toBe("");
  });

  it("a key's own limit overrides the default, above or below it", async () => {
    const low = await stack.createKey({ org: orgId, scopes: "all", rateLimit: 2 });
    const high = await stack.createKey({ org: orgId, scopes: "all", rateLimit: 7 });
    for (let i = 0; i < 2; i++) expectHeaders(await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(low.key) }), 2, 1 - i);
    expect429(await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(low.key) }), 2);
    for (let i = 0; i < 7; i++) {
      const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(high.key) });
      expect(res.statusCode).toBe(200);
      expectHeaders(res, 7, 6 - i);
    }
    expect429(await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(high.key) }), 7);
  });

  it("keys are counted apart, even in one organization", async () => {
    const a = await stack.createKey({ org: orgId, scopes: "all" });
    const b = await stack.createKey({ org: orgId, scopes: "all" });
    for (let i = 0; i < DEFAULT_MAX; i++) await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(a.key) });
    expect429(await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(a.key) }), DEFAULT_MAX);
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(b.key) });
    expect(res.statusCode).toBe(200);
    expectHeaders(res, DEFAULT_MAX, DEFAULT_MAX - 1);
  });

  it("401 responses carry the RateLimit headers too", async () => {
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", remoteAddress: "10.1.2.3" });
    expect(res.statusCode).toBe(401);
    expect(res.headers["ratelimit-limit"]).toBe(String(DEFAULT_MAX));
    expect(res.headers["ratelimit-remaining"]).toBeDefined();
    expect(res.headers["ratelimit-reset"]).toBeDefined();
  });
});

describe("shared by every replica through Redis", () => {
  const gateways: Gateway[] = [];
  const limiters: RateLimiter[] = [];
  const prefix = `test:whereabouts:rl:${randomBytes(8).toString("hex")}`;

  beforeAll(async () => {
    for (let i = 0; i < 2; i++) {
      const limiter = createRedisRateLimiter(new Redis(REDIS_URL), WINDOW_MS, { prefix });
      limiters.push(limiter);
      const gateway = await buildGateway({
        logger: createLogger("test", "silent"),
        nc: stack.nc,
        auth: createAuthService(stack.identity),
        identity: stack.identity,
        rateLimiter: limiter,
        rateLimit: { max: DEFAULT_MAX, windowMs: WINDOW_MS },
        rpcTimeoutMs: 2000,
        readyTimeoutMs: 500,
        watermarks: { seqFor: () => 0 },
      });
      await gateway.ready();
      gateways.push(gateway);
    }
  });
  afterAll(async () => {
    for (const g of gateways) await g.close();
    for (const l of limiters) await l.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });

  it("two gateway instances share one key's count", async () => {
    const { key } = await stack.createKey({ org: orgId, scopes: "all" });
    for (let i = 0; i < DEFAULT_MAX; i++) {
      const res = await gateways[i % 2]!.inject({ method: i % 3 === 0 ? "HEAD" : "GET", url: "/api/v1/assets", headers: bearer(key) });
      expect(res.statusCode).toBe(200);
      expectHeaders(res, DEFAULT_MAX, DEFAULT_MAX - 1 - i);
    }
    expect429(await gateways[0]!.inject({ method: "GET", url: "/api/v1/assets", headers: bearer(key) }), DEFAULT_MAX);
    expect429(await gateways[1]!.inject({ method: "GET", url: "/api/v1/assets", headers: bearer(key) }), DEFAULT_MAX);
    // The in-process gateway of the stack counts on its own.
    expect((await stack.gateway.inject({ method: "GET", url: "/api/v1/assets", headers: bearer(key) })).statusCode).toBe(200);
  });

  it("the per-key override holds across instances", async () => {
    const { key } = await stack.createKey({ org: orgId, scopes: "all", rateLimit: 3 });
    for (let i = 0; i < 3; i++) {
      expectHeaders(await gateways[(i + 1) % 2]!.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(key) }), 3, 2 - i);
    }
    expect429(await gateways[0]!.inject({ method: "GET", url: "/api/v1/orgs/me", headers: bearer(key) }), 3);
  });
});
