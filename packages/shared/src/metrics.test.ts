/**
 * Instrumentation on a real nats-server: RPC counts and latencies with trace
 * ids in the handler's logs, draining on stop, batch-consumer counters and
 * lag, and a service's readiness.
 */
import { Writable } from "node:stream";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatchConsumer } from "./consumer.ts";
import { AppError } from "./errors.ts";
import { createLogger } from "./logger.ts";
import { createMetrics, readMetric } from "./metrics.ts";
import { callRpc, connectNats, encodeJson, ensureStreams, messageHeaders, serveRpc, type NatsConnection } from "./nats.ts";
import { HEADER_TRACEPARENT } from "./rpc.ts";
import { startService, unansweredOperations } from "./service.ts";
import { operationsOf } from "./contracts/operations.ts";
import { STREAMS } from "./subjects.ts";
import { eventually, readDeadLetters, startTestNats, testRpcRequest, type TestNats } from "./testing/index.ts";
import { parseTraceparent } from "./tracing.ts";

const logger = createLogger("test", "silent");
let nats: TestNats;
let server: NatsConnection;
let client: NatsConnection;

const request = testRpcRequest;

/** A pino logger whose lines are collected as objects. */
function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: pino({ level: "info" }, stream) };
}

beforeAll(async () => {
  nats = await startTestNats();
  server = await connectNats({ url: nats.url, name: "server", logger });
  client = await connectNats({ url: nats.url, name: "client", logger });
  await ensureStreams(client);
});
afterAll(async () => {
  await server?.close();
  await client?.close();
  await nats?.destroy();
});

describe("serveRpc with metrics", () => {
  it("counts and times each answer per subject and status, and logs with the caller's trace id", async () => {
    const metrics = createMetrics({ service: "catalog" });
    const { lines, logger: captured } = capturingLogger();
    const seen: string[] = [];
    const rpc = serveRpc(
      server,
      "catalog",
      {
        "asset.list": async (_req, ctx) => {
          ctx.logger.info("listing");
          seen.push(ctx.traceparent!);
          return { status: 200, headers: {}, body: { data: [] } };
        },
        "asset.get": async () => {
          throw new AppError("not_found", "Asset not found");
        },
      },
      captured,
      { metrics },
    );
    await server.flush();
    try {
      const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      await callRpc(client, "catalog.asset.list", request(), { timeoutMs: 2000, traceparent });
      await callRpc(client, "catalog.asset.list", request({ request_id: "req-2" }), { timeoutMs: 2000 });
      await callRpc(client, "catalog.asset.get", request(), { timeoutMs: 2000 });

      expect(await readMetric(metrics, "whereabouts_rpc_requests_total", { subject: "catalog.asset.list", status: "200" })).toBe(2);
      expect(await readMetric(metrics, "whereabouts_rpc_requests_total", { subject: "catalog.asset.get", status: "404" })).toBe(1);
      expect(await readMetric(metrics, "whereabouts_rpc_request_duration_seconds_count", { subject: "catalog.asset.list", status: "200" })).toBe(2);

      const listing = lines.filter((l) => l.msg === "listing");
      expect(listing[0]).toMatchObject({ request_id: "req-1", operation: "asset.list", trace_id: "4bf92f3577b34da6a3ce929d0e0e4736" });
      // No traceparent from the caller: the service starts a trace of its own.
      expect(listing[1]!.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(listing[1]!.trace_id).not.toBe("4bf92f3577b34da6a3ce929d0e0e4736");
      expect(seen[0]).toBe(traceparent);
      expect(parseTraceparent(seen[1])?.traceId).toBe(listing[1]!.trace_id);
    } finally {
      await rpc.stop();
    }
  });

  it("echoes the traceparent on the reply", async () => {
    const rpc = serveRpc(server, "reporting", {}, logger);
    await server.flush();
    try {
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const reply = await client.request("reporting.ping", encodeJson({}), { timeout: 2000, headers: messageHeaders("r", traceparent) });
      expect(reply.headers?.get(HEADER_TRACEPARENT)).toBe(traceparent);
    } finally {
      await rpc.stop();
    }
  });

  it("stop() answers the requests in flight, then takes no more", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const rpc = serveRpc(server, "tracking", { slow: async () => (await gate, { status: 200, headers: {}, body: { done: true } }) }, logger);
    await server.flush();
    const inFlight = callRpc(client, "tracking.slow", request(), { timeoutMs: 5000 });
    await eventually(async () => (rpc.inFlight() === 1 ? true : undefined), 5000, 10);
    let done = false;
    const stopped = rpc.stop().then(() => (done = true));
    // Takes no more while the request in flight is still held, and does not finish before it.
    await expect(callRpc(client, "tracking.slow", request(), { timeoutMs: 300 })).rejects.toMatchObject({ type: "service_unavailable" });
    expect(done).toBe(false);
    release();
    expect(await inFlight).toEqual({ status: 200, headers: {}, body: { done: true } });
    await stopped;
    await expect(callRpc(client, "tracking.slow", request(), { timeoutMs: 300 })).rejects.toMatchObject({ type: "service_unavailable" });
  });
});

describe("runBatchConsumer with metrics", () => {
  it("counts processed and failed messages per durable and samples its lag", async () => {
    const metrics = createMetrics({ service: "reporting" });
    const js = jetstream(client);
    const labels = { stream: STREAMS.CATALOG.name, durable: "metrics-test" };
    let release!: () => void;
    let gate = new Promise<void>((r) => (release = r));
    let failOnce = true;
    const worker = await runBatchConsumer({
      nc: server,
      spec: { stream: STREAMS.CATALOG.name, durable: "metrics-test", ackWaitMs: 30_000, maxDeliver: -1, batchSize: 2 },
      logger,
      metrics,
      retryDelayMs: 50,
      handle: async (messages) => {
        await gate;
        if (failOnce) {
          failOnce = false;
          throw new Error("database down");
        }
        for (const m of messages) m.ack();
      },
    });
    try {
      for (let i = 0; i < 5; i++) await js.publish(`catalog.events.1.asset.created`, encodeJson({ i }));
      // Blocked in the first batch: all five are pending or unacked.
      expect(await eventually(async () => ((await readMetric(metrics, "whereabouts_consumer_lag_messages", labels)) === 5 ? 5 : undefined))).toBe(5);
      release();
      await eventually(async () => (worker.processed() === 5 ? true : undefined));
      expect(await readMetric(metrics, "whereabouts_consumer_messages_processed_total", labels)).toBe(5);
      // The first batch (one or two messages, as they arrived) failed and came back.
      expect([1, 2]).toContain(await readMetric(metrics, "whereabouts_consumer_messages_failed_total", labels));
      expect(await readMetric(metrics, "whereabouts_consumer_batch_duration_seconds_count", { ...labels, outcome: "failed" })).toBe(1);
      await eventually(async () => ((await readMetric(metrics, "whereabouts_consumer_lag_messages", labels)) === 0 ? true : undefined));
    } finally {
      gate = Promise.resolve();
      release();
      await worker.stop();
    }
    // A stopped consumer is no longer sampled.
    expect(await readMetric(metrics, "whereabouts_consumer_lag_messages", labels)).toBeUndefined();
  });
});

describe("runBatchConsumer dead letters", () => {
  it("a handler's poison and a message failing on its last delivery go to DEAD_LETTERS with the reason, and the stream moves on", async () => {
    const metrics = createMetrics({ service: "catalog" });
    const js = jetstream(client);
    const durable = "dead-letter-test";
    const labels = { stream: STREAMS.CATALOG.name, durable };
    const acked: unknown[] = [];
    const worker = await runBatchConsumer({
      nc: server,
      spec: { stream: STREAMS.CATALOG.name, durable, filterSubjects: ["catalog.events.77.>"], ackWaitMs: 30_000, maxDeliver: 3, batchSize: 1 },
      logger,
      metrics,
      retryDelayMs: 20,
      handle: async ([msg], settle) => {
        const body = JSON.parse(new TextDecoder().decode(msg!.data)) as { kind: string };
        if (body.kind === "unreadable") return settle.deadLetter(msg!, "malformed_event", "no such event");
        if (body.kind === "failing") throw new Error("cannot apply it");
        acked.push(body);
        msg!.ack();
      },
    });
    try {
      for (const kind of ["good", "unreadable", "failing", "good"]) await js.publish("catalog.events.77.asset.created", encodeJson({ kind }));
      await eventually(async () => (acked.length === 2 && (await readDeadLetters(server, durable)).length === 2 ? true : undefined), 15_000, 20);
      const letters = await readDeadLetters(server, durable);
      expect(letters.map((l) => [l.reason, l.detail, l.subject, l.text])).toEqual([
        ["malformed_event", "no such event", "catalog.events.77.asset.created", JSON.stringify({ kind: "unreadable" })],
        ["delivery_limit", "cannot apply it", "catalog.events.77.asset.created", JSON.stringify({ kind: "failing" })],
      ]);
      expect(await readMetric(metrics, "whereabouts_consumer_messages_dead_lettered_total", { ...labels, reason: "delivery_limit" })).toBe(1);
      expect(await readMetric(metrics, "whereabouts_consumer_messages_dead_lettered_total", { ...labels, reason: "malformed_event" })).toBe(1);
      // Nothing left pending or unacknowledged: terminated, not waiting for redelivery.
      const jsm = await jetstreamManager(client);
      await eventually(async () => {
        const info = await jsm.consumers.info(STREAMS.CATALOG.name, durable);
        return info.num_pending + info.num_ack_pending === 0 ? true : undefined;
      });
    } finally {
      await worker.stop();
    }
  });
});

describe("startService handler table", () => {
  it("names every public operation of the service that has no handler, and refuses to start without it", async () => {
    const all = Object.fromEntries(operationsOf("reporting").map((op) => [op.name, async () => ({ status: 204, headers: {} })]));
    expect(unansweredOperations("reporting", all)).toEqual([]);
    const { "report.asset_locations": _, ...partial } = all;
    expect(unansweredOperations("reporting", partial)).toEqual(["GET /api/v1/reports/asset-locations (report.asset_locations)"]);
    const nc = await connectNats({ url: nats.url, name: "svc-table", logger });
    try {
      expect(() => startService({ name: "reporting", nc, logger, handlers: partial })).toThrow(/report\.asset_locations/);
    } finally {
      await nc.close();
    }
  });
});

describe("startService readiness", () => {
  it("is ready with NATS connected and its checks passing, and never once stopping", async () => {
    const nc = await connectNats({ url: nats.url, name: "svc", logger });
    let database = true;
    // A service answers every public operation the catalog routes to it (startService refuses to start otherwise).
    const handlers = Object.fromEntries(operationsOf("catalog").map((op) => [op.name, async () => ({ status: 204, headers: {} })]));
    const service = startService({ name: "catalog", nc, logger, handlers, readinessChecks: { database: () => database } });
    expect(await service.readiness()).toEqual({ ready: true, checks: { nats: true, database: true } });
    database = false;
    expect(await service.readiness()).toEqual({ ready: false, checks: { nats: true, database: false } });
    database = true;
    await service.stop();
    expect(nc.isClosed()).toBe(true);
    expect(await service.readiness()).toEqual({ ready: false, checks: { stopping: false } });
  });
});
