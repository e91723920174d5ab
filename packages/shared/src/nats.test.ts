/** NATS helpers against a real nats-server: RPC that always answers, calls that never hang. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "./errors.ts";
import { createLogger } from "./logger.ts";
import {
  callRpc,
  callRpcRaw,
  connectNats,
  decodeRpcReply,
  decodeJson,
  encodeJson,
  ensureStreams,
  natsConnected,
  pingService,
  serveRpc,
  utf8Bytes,
  type NatsConnection,
} from "./nats.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { JsonText } from "./rpc.ts";
import { eventually, startTestNats, testRpcRequest, type TestNats } from "./testing/index.ts";

const logger = createLogger("test", "silent");
let nats: TestNats;
let server: NatsConnection;
let client: NatsConnection;

const request = testRpcRequest;

async function errorOf(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error("did not throw");
}

beforeAll(async () => {
  nats = await startTestNats();
  server = await connectNats({ url: nats.url, name: "server", logger });
  client = await connectNats({ url: nats.url, name: "client", logger });
});
afterAll(async () => {
  await server?.close();
  await client?.close();
  await nats?.destroy();
});

describe("encodeJson / utf8Bytes", () => {
  it("writes UTF-8 that decodes to the same value, small (pooled) and large alike", () => {
    const small = { name: "Gabelstapler Ø 3 – 🚜", n: 1 };
    const large = { items: Array.from({ length: 2000 }, (_, i) => `Régal ${i} 🏷`) };
    for (const value of [small, large]) {
      const bytes = encodeJson(value);
      expect(bytes).toBeInstanceOf(Uint8Array);
      expect(new Uint8Array(bytes)).toEqual(new TextEncoder().encode(JSON.stringify(value)));
      expect(decodeJson(bytes)).toEqual(value);
    }
    // Two small encodings share Buffer's pool: neither overwrites the other.
    const a = utf8Bytes("first");
    const b = utf8Bytes("second");
    expect(new TextDecoder().decode(a)).toBe("first");
    expect(new TextDecoder().decode(b)).toBe("second");
  });
});

describe("serveRpc / callRpc", () => {
  it("answers handlers, errors as envelopes, and ping", async () => {
    const rpc = serveRpc(server, "catalog", {
      "asset.list": async (req) => ({ status: 200, headers: { "x-a": "1" }, body: { data: [], echo: req.query } }),
      "asset.get": async () => {
        throw new AppError("not_found", "Asset not found");
      },
      "asset.crash": async () => {
        throw new Error("secret text");
      },
    }, logger);
    await server.flush();
    try {
      expect(await callRpc(client, "catalog.asset.list", request({ query: { a: ["1", "2"] } }), { timeoutMs: 1000 })).toEqual({
        status: 200,
        headers: { "x-a": "1" },
        body: { data: [], echo: { a: ["1", "2"] } },
      });
      // GET carries no body: the envelope without `body` is valid.
      const notFound = await callRpc(client, "catalog.asset.get", request({ path: "/api/v1/assets/9" }), { timeoutMs: 1000 });
      expect(notFound).toMatchObject({ status: 404, body: { error: { type: "not_found", instance: "/api/v1/assets/9", request_id: "req-1" } } });
      const crash = await callRpc(client, "catalog.asset.crash", request(), { timeoutMs: 1000 });
      expect(crash).toMatchObject({ status: 500, body: { error: { type: "internal_error", detail: "An unexpected error occurred" } } });
      expect(JSON.stringify(crash)).not.toContain("secret");
      expect(await pingService(client, "catalog", 500)).toBe(true);
      expect(await pingService(client, "tracking", 500)).toBe(false);
    } finally {
      await rpc.stop();
    }
  });

  it("a malformed envelope gets a 400 reply, not silence", async () => {
    const rpc = serveRpc(server, "catalog", { "asset.list": async () => ({ status: 200, headers: {} }) }, logger);
    await server.flush();
    try {
      const msg = await client.request("catalog.asset.list", encodeJson({ nope: true }), { timeout: 1000 });
      expect(decodeRpcReply(msg)).toMatchObject({ status: 400, body: { error: { type: "bad_request" } } });
    } finally {
      await rpc.stop();
    }
  });

  it("no responder and no reply are 503 with Retry-After", async () => {
    const none = await errorOf(callRpc(client, "reporting.report.asset_locations", request(), { timeoutMs: 2000 }));
    expect(none.type).toBe("service_unavailable");
    expect(none.headers["retry-after"]).toBe("1");
    const sub = server.subscribe("tracking.history.list", { callback: () => undefined });
    await server.flush();
    try {
      const started = Date.now();
      const silent = await errorOf(callRpc(client, "tracking.history.list", request(), { timeoutMs: 300 }));
      expect(silent.type).toBe("service_unavailable");
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    } finally {
      sub.unsubscribe();
    }
  });

  it("replies carry status and headers beside the body, which arrives as the handler's JSON text", async () => {
    const rpc = serveRpc(
      server,
      "catalog",
      {
        "asset.get": async () => ({ status: 201, headers: { location: "/x/1" }, body: new JsonText('{"data":{"id":1}}') }),
        "asset.delete": async () => ({ status: 204, headers: {} }),
      },
      logger,
    );
    await server.flush();
    try {
      const raw = await callRpcRaw(client, "catalog.asset.get", request(), { timeoutMs: 1000 });
      expect(raw.status).toBe(201);
      expect(raw.headers).toEqual({ location: "/x/1" });
      expect(new TextDecoder().decode(raw.payload)).toBe('{"data":{"id":1}}');
      expect(await callRpc(client, "catalog.asset.delete", request(), { timeoutMs: 1000 })).toEqual({ status: 204, headers: {} });
    } finally {
      await rpc.stop();
    }
  });

  it("a reply that is not an RpcReply is an internal error, not a 503", async () => {
    const sub = server.subscribe("catalog.bad.reply", { callback: (_e, msg) => void msg.respond(encodeJson({ status: "x" })) });
    await server.flush();
    try {
      const err = await callRpc(client, "catalog.bad.reply", request(), { timeoutMs: 1000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(AppError);
    } finally {
      sub.unsubscribe();
    }
  });

  it("a request over the broker's max_payload is 413; a reply over it becomes a 500 reply", async () => {
    const max = client.info!.max_payload;
    const tooBig = await errorOf(callRpc(client, "catalog.asset.create", request({ body: "x".repeat(max + 1) }), { timeoutMs: 1000 }));
    expect(tooBig.type).toBe("payload_too_large");
    const rpc = serveRpc(server, "catalog", { "asset.huge": async () => ({ status: 200, headers: {}, body: "y".repeat(max + 1) }) }, logger);
    await server.flush();
    try {
      const reply = await callRpc(client, "catalog.asset.huge", request(), { timeoutMs: 2000 });
      expect(reply).toMatchObject({ status: 500, body: { error: { type: "internal_error" } } });
    } finally {
      await rpc.stop();
    }
  });

  it("stop() waits for requests in flight", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = false;
    const rpc = serveRpc(server, "catalog", {
      "asset.slow": async () => {
        await gate;
        finished = true;
        return { status: 200, headers: {} };
      },
    }, logger);
    await server.flush();
    const call = callRpc(client, "catalog.asset.slow", request(), { timeoutMs: 5000 });
    await eventually(async () => (rpc.inFlight() === 1 ? true : undefined), 5000, 10);
    let stopped = false;
    const stopping = rpc.stop().then(() => (stopped = true));
    // The subscription is gone (a new request finds no responder) while the one in flight is still held.
    await expect(callRpc(client, "catalog.asset.slow", request(), { timeoutMs: 300 })).rejects.toMatchObject({ type: "service_unavailable" });
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(true);
    expect((await call).status).toBe(200);
  });

  it("the test server takes a 1 MiB body inside an envelope", () => {
    expect(client.info!.max_payload).toBeGreaterThan(2 * 1024 * 1024);
    expect(natsConnected(client)).toBe(true);
  });
});

describe("ensureStreams", () => {
  it("replicas booting together on an empty broker all succeed and leave one set of streams", async () => {
    const server = await startTestNats();
    const logger = createLogger("test", "silent");
    const conns = await Promise.all(Array.from({ length: 8 }, (_, i) => connectNats({ url: server.url, name: `boot-${i}`, logger })));
    try {
      const results = await Promise.allSettled(conns.map((c) => ensureStreams(c)));
      expect(results.filter((r) => r.status === "rejected")).toEqual([]);
      const jsm = await jetstreamManager(conns[0]!);
      const names: string[] = [];
      for await (const info of jsm.streams.list()) names.push(info.config.name);
      expect(names.sort()).toEqual(["CATALOG", "DEAD_LETTERS", "SCANS", "SCANS_DLQ", "TRACKING"]);
    } finally {
      for (const c of conns) await c.close();
      await server.destroy();
    }
  });
});
