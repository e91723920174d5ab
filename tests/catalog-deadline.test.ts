/**
 * A write whose reply times out at the gateway never commits afterwards
 * (issue 10): the RPC envelope carries the caller's deadline and the catalog
 * rolls back at COMMIT once it has passed, so a client that got 503 can
 * retry without duplicating the row. A write is made slow by a lock the test
 * holds in Postgres; nothing sleeps.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, deadlineGraceMs, rpcDeadline } from "@whereabouts/shared";
import { buildGateway, type Gateway } from "../services/gateway/src/app.ts";
import { createAuthService } from "../services/gateway/src/identity/auth-service.ts";
import { createMemoryRateLimiter } from "../services/gateway/src/rate-limit/rate-limiter.ts";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

const FAST_TIMEOUT_MS = 1500;

let stack: Stack;
let api: ApiCall;
let auth: Record<string, string>;
/** A second gateway on the same broker that waits only FAST_TIMEOUT_MS for a reply. */
let hasty: Gateway;
let locker: pg.Client;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_deadline", services: ["catalog"] });
  ({ auth } = await stack.tenant("Deadline Org"));
  api = apiClient(stack, auth);
  hasty = await buildGateway({
    logger: createLogger("test", "silent"),
    nc: stack.nc,
    auth: createAuthService(stack.identity),
    identity: stack.identity,
    rateLimiter: createMemoryRateLimiter(60_000),
    rateLimit: { max: 100_000, windowMs: 60_000 },
    rpcTimeoutMs: FAST_TIMEOUT_MS,
    readyTimeoutMs: 500,
    // Catalog alone: its reads see its own writes, no watermark needed.
    watermarks: { seqFor: () => 0 },
  });
  locker = new pg.Client({ connectionString: stack.db.url });
  await locker.connect();
});
afterAll(async () => {
  await locker?.end();
  await hasty?.close();
  await stack?.close();
});

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Polls until `check` holds, for at most `timeoutMs`. */
async function until(check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not reached in time");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The catalog has answered everything it was sent (the rolled-back write included). */
const catalogIdle = () => until(() => stack.services.catalog!.rpc.inFlight() === 0);

/** Runs `request` while the test holds `lockSql`, releasing it once the gateway has answered. */
async function whileLocked(lockSql: string, params: unknown[], request: () => Promise<{ statusCode: number; body: string }>) {
  await locker.query("BEGIN");
  try {
    await locker.query(lockSql, params);
    const res = await request();
    return res;
  } finally {
    await locker.query("COMMIT");
  }
}

const outboxCount = async () => Number((await locker.query("SELECT count(*) AS n FROM catalog.outbox_events")).rows[0].n);

describe("the RPC deadline", () => {
  it("is sent ahead of the caller's timeout, leaving a grace for the reply", () => {
    expect(rpcDeadline(5000, 1_000)).toBe(1_000 + 5000 - deadlineGraceMs(5000));
    expect(deadlineGraceMs(5000)).toBe(1000);
    expect(deadlineGraceMs(400)).toBe(80);
  });

  it("a create that the gateway gave up on rolls back: the retry creates the one row", async () => {
    const key = `DL-${Date.now().toString(36)}`;
    const before = await outboxCount();
    const res = await whileLocked("LOCK TABLE catalog.assets IN SHARE MODE", [], () =>
      hasty.inject({
        method: "POST",
        url: "/api/v1/assets",
        headers: { ...auth, "content-type": "application/json" },
        payload: JSON.stringify({ name: "slow", external_key: key }),
      }),
    );
    expect(res.statusCode).toBe(503);
    expect(JSON.parse(res.body).error.type).toBe("service_unavailable");
    await catalogIdle();
    const listed = await api<Body>("GET", `/api/v1/assets?external_key=${key}&include_deleted=true`);
    expect(listed.body.total_count).toBe(0);
    expect(await outboxCount()).toBe(before);
    // The retry (unhindered, through the same hasty gateway) creates it once.
    const retry = await hasty.inject({
      method: "POST",
      url: "/api/v1/assets",
      headers: { ...auth, "content-type": "application/json" },
      payload: JSON.stringify({ name: "slow", external_key: key }),
    });
    expect(retry.statusCode).toBe(201);
    expect((await api<Body>("GET", `/api/v1/assets?external_key=${key}`)).body.total_count).toBe(1);
  });

  it("a PATCH that the gateway gave up on leaves the row unchanged", async () => {
    const created = await api<Body>("POST", "/api/v1/locations", { name: "before" });
    const location = created.body.data;
    const res = await whileLocked("SELECT 1 FROM catalog.locations WHERE id = $1 FOR UPDATE", [location.id], () =>
      hasty.inject({
        method: "PATCH",
        url: `/api/v1/locations/${location.id}`,
        headers: { ...auth, "content-type": "application/merge-patch+json" },
        payload: JSON.stringify({ name: "after" }),
      }),
    );
    expect(res.statusCode).toBe(503);
    await catalogIdle();
    const got = await api<Body>("GET", `/api/v1/locations/${location.id}`);
    expect(got.body.data).toMatchObject({ name: "before", updated_at: location.updated_at });
  });

  it("a write within its deadline commits as before", async () => {
    const res = await hasty.inject({
      method: "POST",
      url: "/api/v1/locations",
      headers: { ...auth, "content-type": "application/json" },
      payload: JSON.stringify({ name: "quick" }),
    });
    expect(res.statusCode).toBe(201);
  });
});
