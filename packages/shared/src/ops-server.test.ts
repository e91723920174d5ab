/** The ops server: probes, readiness checks, and the sampled metrics it serves. */
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "./logger.ts";
import { createMetrics, readMetric } from "./metrics.ts";
import { runReadinessChecks, startOpsServer, type OpsServer } from "./ops-server.ts";

const logger = createLogger("test", "silent");
let ops: OpsServer | undefined;
afterEach(async () => {
  await ops?.close();
  ops = undefined;
});

describe("runReadinessChecks", () => {
  it("passes unless a check returns false, throws or outlasts the timeout", async () => {
    expect(await runReadinessChecks({ a: () => true, b: async () => [{ "?column?": 1 }], c: () => undefined })).toEqual({
      ready: true,
      checks: { a: true, b: true, c: true },
    });
    const started = Date.now();
    const report = await runReadinessChecks(
      {
        ok: () => true,
        no: () => false,
        throws: async () => {
          throw new Error("connection refused");
        },
        hangs: () => new Promise(() => undefined),
      },
      200,
    );
    expect(report).toEqual({ ready: false, checks: { ok: true, no: false, throws: false, hangs: false } });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe("startOpsServer", () => {
  it("serves /healthz always, and /readyz from the readiness it is given (503 while starting)", async () => {
    const metrics = createMetrics({ service: "test" });
    ops = await startOpsServer({ port: 0, host: "127.0.0.1", metrics, logger });
    expect(ops.port).toBeGreaterThan(0);

    const health = await fetch(`${ops.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });

    const starting = await fetch(`${ops.url}/readyz`);
    expect(starting.status).toBe(503);
    expect(await starting.json()).toEqual({ status: "not_ready", checks: { starting: false } });

    let database = true;
    ops.setReadiness(() => runReadinessChecks({ nats: () => true, database: () => database }));
    const ready = await fetch(`${ops.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.headers.get("content-type")).toBe("application/json");
    expect(await ready.json()).toEqual({ status: "ready", checks: { nats: true, database: true } });

    database = false;
    const down = await fetch(`${ops.url}/readyz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ status: "not_ready", checks: { nats: true, database: false } });
    expect((await fetch(`${ops.url}/healthz`)).status).toBe(200);
  });

  it("answers HEAD, refuses other methods with 405 and Allow, and other paths with 404", async () => {
    ops = await startOpsServer({ port: 0, host: "127.0.0.1", metrics: createMetrics({ service: "test" }), logger });
    const head = await fetch(`${ops.url}/healthz`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    const post = await fetch(`${ops.url}/readyz`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect((await fetch(`${ops.url}/nope`)).status).toBe(404);
    expect((await fetch(`${ops.url}/healthz?x=1`)).status).toBe(200);
  });

  it("serves Prometheus text with the service label, counters, histograms and sampled gauges", async () => {
    const metrics = createMetrics({ service: "catalog" });
    ops = await startOpsServer({ port: 0, host: "127.0.0.1", metrics, logger });
    metrics.rpcRequests.inc({ subject: "catalog.asset.get", status: "404" });
    metrics.rpcDuration.observe({ subject: "catalog.asset.get", status: "404" }, 0.012);
    metrics.deadLettered.inc({ reason: "unknown_tag" }, 2);
    const pool = { totalCount: 7, idleCount: 3, waitingCount: 2, options: { max: 10 } };
    const unwatchPool = metrics.watchPool("catalog", pool);
    let backlog = 4;
    metrics.watchOutbox("catalog", async () => backlog);
    metrics.watchConsumerLag("TRACKING", "catalog-tracking", async () => ({ num_pending: 5, num_ack_pending: 2 }));
    metrics.watchConsumerLag("CATALOG", "broken", async () => {
      throw new Error("timeout");
    });

    const res = await fetch(`${ops.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    expect(text).toContain('whereabouts_rpc_requests_total{subject="catalog.asset.get",status="404",service="catalog"} 1');
    expect(text).toContain('whereabouts_rpc_request_duration_seconds_bucket{le="0.025",service="catalog",subject="catalog.asset.get",status="404"} 1');
    expect(text).toContain('whereabouts_dead_lettered_total{reason="unknown_tag",service="catalog"} 2');
    expect(text).toContain('whereabouts_db_pool_connections{pool="catalog",state="in_use",service="catalog"} 4');
    expect(text).toContain('whereabouts_db_pool_connections{pool="catalog",state="idle",service="catalog"} 3');
    expect(text).toContain('whereabouts_db_pool_waiting_requests{pool="catalog",service="catalog"} 2');
    expect(text).toContain('whereabouts_db_pool_max_connections{pool="catalog",service="catalog"} 10');
    expect(text).toContain('whereabouts_outbox_backlog_events{outbox="catalog",service="catalog"} 4');
    expect(text).toContain('whereabouts_consumer_lag_messages{stream="TRACKING",durable="catalog-tracking",service="catalog"} 7');
    // A source that cannot be read is unknown, not a stale or zero value.
    expect(text).toContain('whereabouts_consumer_lag_messages{stream="CATALOG",durable="broken",service="catalog"} Nan');
    // No process metrics unless asked for (tests build many registries).
    expect(text).not.toContain("process_cpu");

    // Sampled at each scrape; an unwatched source disappears.
    backlog = 0;
    pool.idleCount = 7;
    unwatchPool();
    expect(await readMetric(metrics, "whereabouts_outbox_backlog_events", { outbox: "catalog" })).toBe(0);
    expect(await readMetric(metrics, "whereabouts_db_pool_connections", { pool: "catalog", state: "idle" })).toBeUndefined();
    expect(await readMetric(metrics, "whereabouts_rpc_request_duration_seconds_count", { subject: "catalog.asset.get" })).toBe(1);
  });

  it("bounds a slow sampled source by the scrape budget", async () => {
    const metrics = createMetrics({ service: "test" });
    // A source that never answers: the scrape must not wait for it.
    metrics.watchOutbox("slow", () => new Promise<number>(() => undefined));
    const started = Date.now();
    expect(await readMetric(metrics, "whereabouts_outbox_backlog_events", { outbox: "slow" })).toBeNaN();
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("adds process metrics when asked, and fails to start on a port in use", async () => {
    const metrics = createMetrics({ service: "gateway", processMetrics: true });
    ops = await startOpsServer({ port: 0, host: "127.0.0.1", metrics, logger });
    expect(await (await fetch(`${ops.url}/metrics`)).text()).toContain('process_cpu_user_seconds_total{service="gateway"}');
    await expect(startOpsServer({ port: ops.port, host: "127.0.0.1", metrics, logger })).rejects.toThrow(/EADDRINUSE/);
  });
});
