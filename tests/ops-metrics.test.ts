/**
 * Metrics and trace context across the real gateway, catalog and reporting,
 * in process, each with its own registry (as each process has one): HTTP
 * requests per route pattern, RPCs per subject, rate-limit rejections,
 * consumer counters and lag, outbox backlog, pool use; and one trace id in
 * the gateway's and the service's log lines of the same request.
 */
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectNats,
  createLogger,
  createMetrics,
  DURABLES,
  ensureStreams,
  readMetric,
  startOpsServer,
  STREAMS,
  type Metrics,
  type NatsConnection,
  type OpsServer,
  type RunningService,
} from "@whereabouts/shared";
import { createTestDatabase, eventually, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll } from "../scripts/migrate.ts";
import { jetStreamPublisher, startCatalog } from "../services/catalog/src/app.ts";
import { buildGateway, type Gateway } from "../services/gateway/src/app.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";
import { createAuthService } from "../services/gateway/src/identity/auth-service.ts";
import { createIdentityClient, createIdentityStore, type IdentityClient, type IdentityStore } from "../services/gateway/src/identity/identity-store.ts";
import { createMemoryRateLimiter, type RateLimiter } from "../services/gateway/src/rate-limit/rate-limiter.ts";
import { startReporting } from "../services/reporting/src/app.ts";

/** A pino logger whose lines are collected as objects. */
function capturingLogger(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: pino({ level }, stream) };
}

const silent = createLogger("test", "silent");
let db: TestDatabase;
let nats: TestNats;
const connections: NatsConnection[] = [];
let identityDb: IdentityClient;
let identity: IdentityStore;
let rateLimiter: RateLimiter;
let gateway: Gateway;
let catalog: RunningService;
let reporting: RunningService;
let ops: OpsServer;
const metrics: Record<"gateway" | "catalog" | "reporting", Metrics> = {
  gateway: createMetrics({ service: "gateway" }),
  catalog: createMetrics({ service: "catalog" }),
  reporting: createMetrics({ service: "reporting" }),
};
const gatewayLog = capturingLogger("info");
const catalogLog = capturingLogger("debug");
let failPublish = false;
let auth: Record<string, string>;

async function connection(name: string) {
  const nc = await connectNats({ url: nats.url, name, logger: silent });
  connections.push(nc);
  return nc;
}

beforeAll(async () => {
  db = await createTestDatabase("ops_metrics");
  nats = await startTestNats();
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  const nc = await connection("gateway");
  await ensureStreams(nc);

  const catalogNc = await connection("catalog");
  const publish = jetStreamPublisher(catalogNc);
  catalog = await startCatalog({
    nc: catalogNc,
    logger: catalogLog.logger,
    databaseUrl: db.url,
    metrics: metrics.catalog,
    relayIntervalMs: 200,
    publish: async (subject, payload, msgId) => {
      if (failPublish) throw new Error("JetStream unavailable");
      return publish(subject, payload, msgId);
    },
  });
  reporting = await startReporting({ nc: await connection("reporting"), logger: silent, databaseUrl: db.url, metrics: metrics.reporting });
  ops = await startOpsServer({ port: 0, host: "127.0.0.1", metrics: metrics.catalog, logger: silent, readiness: catalog.readiness });

  identityDb = createIdentityClient(db.url);
  identity = createIdentityStore(identityDb);
  // A frozen clock: a window boundary between two requests of a test would reset the count.
  rateLimiter = createMemoryRateLimiter(60_000, () => 1_000);
  gateway = await buildGateway({
    logger: gatewayLog.logger,
    nc,
    auth: createAuthService(identity),
    identity,
    rateLimiter,
    rateLimit: { max: 100_000, windowMs: 60_000 },
    rpcTimeoutMs: 5000,
    readyTimeoutMs: 500,
    // Nothing here reads a projection right after a write: no watermark needed.
    watermarks: { seqFor: () => 0 },
    metrics: metrics.gateway,
  });
  await gateway.ready();
  const org = (await runAdminCommand(["org", "create", "--name", "Metrics"], identity)) as { id: number };
  const { key } = (await runAdminCommand(["key", "create", "--org", String(org.id), "--scopes", "all"], identity)) as { key: string };
  auth = { authorization: `Bearer ${key}` };
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await ops?.close();
  await catalog?.stop();
  await reporting?.stop();
  for (const c of connections) if (!c.isClosed()) await c.close();
  await rateLimiter?.close();
  await identityDb?.$disconnect();
  await nats?.destroy();
  await db?.drop();
});

const createAsset = async (name: string, headers: Record<string, string> = {}) => {
  const res = await gateway.inject({
    method: "POST",
    url: "/api/v1/assets",
    headers: { ...auth, "content-type": "application/json", ...headers },
    payload: JSON.stringify({ name }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: (res.json() as { data: { id: number } }).data.id, requestId: res.headers["x-request-id"] as string };
};

describe("metrics", () => {
  it("counts HTTP requests per route pattern at the gateway, and RPCs per subject at the service", async () => {
    const { id } = await createAsset("counted");
    expect((await gateway.inject({ method: "GET", url: `/api/v1/assets/${id}`, headers: auth })).statusCode).toBe(200);
    expect((await gateway.inject({ method: "GET", url: "/api/v1/assets/99999999", headers: auth })).statusCode).toBe(404);
    expect((await gateway.inject({ method: "GET", url: "/api/v1/nothing-here", headers: auth })).statusCode).toBe(404);

    const http = (method: string, route: string, status: string) =>
      readMetric(metrics.gateway, "whereabouts_http_requests_total", { method, route, status });
    expect(await http("POST", "/api/v1/assets", "201")).toBeGreaterThanOrEqual(1);
    expect(await http("GET", "/api/v1/assets/:asset_id", "200")).toBe(1);
    expect(await http("GET", "/api/v1/assets/:asset_id", "404")).toBe(1);
    expect(await http("GET", "unmatched", "404")).toBe(1);
    expect(
      await readMetric(metrics.gateway, "whereabouts_http_request_duration_seconds_count", {
        method: "GET",
        route: "/api/v1/assets/:asset_id",
        status: "200",
      }),
    ).toBe(1);

    const rpc = (subject: string, status: string) => readMetric(metrics.catalog, "whereabouts_rpc_requests_total", { subject, status });
    expect(await rpc("catalog.asset.create", "201")).toBeGreaterThanOrEqual(1);
    expect(await rpc("catalog.asset.get", "200")).toBe(1);
    expect(await rpc("catalog.asset.get", "404")).toBe(1);
    // Each service counts only its own subjects.
    expect(await readMetric(metrics.reporting, "whereabouts_rpc_requests_total", { subject: "catalog.asset.get" })).toBeUndefined();
  });

  it("counts rate-limit rejections per key", async () => {
    const org = (await runAdminCommand(["org", "create", "--name", "Limited"], identity)) as { id: number };
    const limited = (await runAdminCommand(["key", "create", "--org", String(org.id), "--scopes", "all", "--rate-limit", "1"], identity)) as {
      id: number;
      key: string;
    };
    const headers = { authorization: `Bearer ${limited.key}` };
    expect((await gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers })).statusCode).toBe(200);
    expect((await gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers })).statusCode).toBe(429);
    expect((await gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers })).statusCode).toBe(429);
    expect(await readMetric(metrics.gateway, "whereabouts_rate_limited_total", { key_id: String(limited.id) })).toBe(2);
    expect(await readMetric(metrics.gateway, "whereabouts_http_requests_total", { route: "/api/v1/orgs/me", status: "429" })).toBe(2);
  });

  it("counts consumed messages and samples lag per durable, and pool use per service", async () => {
    await createAsset("consumed");
    const catalogDurable = { stream: STREAMS.CATALOG.name, durable: DURABLES.reportingCatalog };
    await eventually(async () => {
      const processed = await readMetric(metrics.reporting, "whereabouts_consumer_messages_processed_total", catalogDurable);
      const lag = await readMetric(metrics.reporting, "whereabouts_consumer_lag_messages", catalogDurable);
      return processed !== undefined && processed >= 2 && lag === 0 ? true : undefined;
    });
    expect(
      await readMetric(metrics.reporting, "whereabouts_consumer_lag_messages", { stream: STREAMS.TRACKING.name, durable: DURABLES.reportingTracking }),
    ).toBe(0);
    expect(
      await readMetric(metrics.catalog, "whereabouts_consumer_lag_messages", { stream: STREAMS.TRACKING.name, durable: DURABLES.catalogTracking }),
    ).toBe(0);
    expect(await readMetric(metrics.reporting, "whereabouts_consumer_batch_duration_seconds_count", { ...catalogDurable, outcome: "ok" })).toBeGreaterThanOrEqual(1);

    expect(await readMetric(metrics.catalog, "whereabouts_db_pool_max_connections", { pool: "catalog" })).toBe(10);
    expect(await readMetric(metrics.reporting, "whereabouts_db_pool_max_connections", { pool: "reporting" })).toBe(10);
    expect(await readMetric(metrics.catalog, "whereabouts_db_pool_connections", { pool: "catalog", state: "idle" })).toBeGreaterThanOrEqual(1);
    expect(await readMetric(metrics.catalog, "whereabouts_db_pool_waiting_requests", { pool: "catalog" })).toBe(0);
  });

  it("shows the catalog outbox backlog while events cannot be published, and its return to zero", async () => {
    expect(await readMetric(metrics.catalog, "whereabouts_outbox_backlog_events", { outbox: "catalog" })).toBe(0);
    failPublish = true;
    try {
      await createAsset("stuck in the outbox");
      expect(await readMetric(metrics.catalog, "whereabouts_outbox_backlog_events", { outbox: "catalog" })).toBe(1);
    } finally {
      failPublish = false;
    }
    await eventually(async () => ((await readMetric(metrics.catalog, "whereabouts_outbox_backlog_events", { outbox: "catalog" })) === 0 ? true : undefined));
  });

  it("serves it all on the ops server, with readiness from the service", async () => {
    const text = await (await fetch(`${ops.url}/metrics`)).text();
    expect(text).toMatch(/^whereabouts_rpc_requests_total\{subject="catalog\.asset\.create",status="201",service="catalog"\} \d+$/m);
    expect(text).toContain('whereabouts_outbox_backlog_events{outbox="catalog",service="catalog"} 0');
    const ready = await fetch(`${ops.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready", checks: { nats: true, database: true } });
  });
});

describe("trace context", () => {
  const byRequest = (lines: Array<Record<string, unknown>>, requestId: string) => lines.filter((l) => l.request_id === requestId);

  it("continues the caller's trace: one trace id in the gateway's and the catalog's log lines", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const { requestId } = await createAsset("traced", { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    const gatewayLines = byRequest(gatewayLog.lines, requestId);
    expect(gatewayLines.map((l) => l.msg)).toEqual(expect.arrayContaining(["incoming request", "request completed"]));
    for (const line of gatewayLines) expect(line.trace_id).toBe(traceId);
    const catalogLines = byRequest(catalogLog.lines, requestId);
    expect(catalogLines.find((l) => l.msg === "rpc answered")).toMatchObject({ trace_id: traceId, operation: "asset.create", status: 201 });
  });

  it("starts a trace when the caller sends none (or an invalid one), and the service logs the same id", async () => {
    for (const headers of [{}, { traceparent: "00-not-a-trace-01" }] as Array<Record<string, string>>) {
      const { requestId } = await createAsset("new trace", headers);
      const traceIds = new Set(
        [...byRequest(gatewayLog.lines, requestId), ...byRequest(catalogLog.lines, requestId)].map((l) => l.trace_id),
      );
      expect(traceIds.size).toBe(1);
      expect([...traceIds][0]).toMatch(/^[0-9a-f]{32}$/);
    }
  });
});
