/**
 * Test fixtures: every test file gets its own database (and, where it needs
 * JetStream to itself, its own nats-server), so files never collide.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { DeliverPolicy, jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_DATABASE_URL } from "../config.ts";
import { announceCatalogWrite } from "../consistency.ts";
import { encodeJson } from "../nats.ts";
import { catalogEventSubject, deadLetterSubject, STREAMS } from "../subjects.ts";
import { DLQ_DETAIL_HEADER, DLQ_REASON_HEADER, DLQ_SUBJECT_HEADER } from "../contracts/tracking.ts";
import { dropDatabase, ensureDatabase } from "../db.ts";
import type { RpcRequest } from "../rpc.ts";

export * from "./catalog-views.ts";
export * from "./query-plans.ts";

/**
 * A port nothing listens on, for a server a test starts later. Drawn at random
 * below Linux's ephemeral range (32768-60999): a port the kernel handed out
 * (listen(0)) is free only until the next outgoing connection of any process
 * here takes it, and a stack starting eight services makes dozens.
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await portFree(port)) return port;
  }
  throw new Error("no free port found in 20000-31999");
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A free port in [from, to], for runs told to keep to a range (a shared
 * machine hands each user its own); throws when every one is taken.
 */
export async function freePortIn(from: number, to: number): Promise<number> {
  for (let port = from; port <= to; port++) {
    if (await portFree(port)) return port;
  }
  throw new Error(`no free port in ${from}-${to}`);
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh database on the machine's Postgres (DATABASE_URL's server), named
 * `<prefix><label>_<random>`: tests use the default prefix, scripts their own
 * (`wa_chaos_` for `npm run chaos`), so a leftover says who left it.
 */
export async function createTestDatabase(label: string, options: { prefix?: string } = {}): Promise<TestDatabase> {
  const base = new URL(process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  const prefix = options.prefix ?? "t_";
  const name = `${prefix}${label.replace(/[^a-z0-9]/gi, "_").toLowerCase()}_${randomBytes(4).toString("hex")}`.slice(0, 60);
  base.pathname = `/${name}`;
  const url = base.toString();
  await ensureDatabase(url);
  return { url, drop: () => dropDatabase(url) };
}

export interface TestNats {
  url: string;
  port: number;
  /**
   * Stops the server (keeping its store), as a restart (SIGTERM) or a crash
   * (SIGKILL) would; `start()` brings it back on the same port and store.
   */
  stop(signal?: "SIGTERM" | "SIGKILL"): Promise<void>;
  start(): Promise<void>;
  /** Stops it and removes its store. */
  destroy(): Promise<void>;
}

const NATS_BIN = process.env.NATS_SERVER_BIN || "nats-server";
/** Bytes; a 1 MiB HTTP body plus its RPC envelope must fit. */
export const NATS_MAX_PAYLOAD = 8 * 1024 * 1024;

/** Starts a private nats-server with JetStream on `port` (by default a free one). */
export async function startTestNats(options: { port?: number; extraArgs?: string[] } = {}): Promise<TestNats> {
  const extraArgs = options.extraArgs ?? [];
  const port = options.port ?? (await freePort());
  const storeDir = await mkdtemp(path.join(tmpdir(), "wa-nats-"));
  // Room for a 1 MiB request body inside its RPC envelope (the default is 1 MB).
  const configFile = path.join(storeDir, "nats.conf");
  await writeFile(configFile, `max_payload: ${NATS_MAX_PAYLOAD}\n`);
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(NATS_BIN, ["-c", configFile, "-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir, ...extraArgs], {
      stdio: "ignore",
    });
    await waitForPort(port, 10_000);
  };
  const stop = async (signal: "SIGTERM" | "SIGKILL" = "SIGTERM") => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill(signal);
    });
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    start,
    stop,
    destroy: async () => {
      await stop("SIGTERM");
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}

export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const { connect } = await import("node:net");
  const open = () =>
    new Promise<true | undefined>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(undefined));
    });
  await eventually(open, timeoutMs).catch((err: unknown) => {
    throw new Error(`port ${port} did not open within ${timeoutMs} ms`, { cause: err });
  });
}

/** A gate a test opens when it chooses: work that awaits `opened` waits until `open()`. */
export function latch(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** `promise`, or a rejection with `describe()`'s text once `timeoutMs` has passed without it settling. */
export async function within<T>(promise: Promise<T>, timeoutMs: number, describe: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(describe())), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls until `check` returns a value other than undefined. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, stepMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`, { cause: lastError });
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/**
 * Publishes a catalog event as catalog does: stored in the CATALOG stream
 * (Nats-Msg-Id = `msgId`), then the organization's read-your-writes watermark
 * announced, and only then resolved, once the announcement has gone round the
 * server (as catalog's reply would follow it).
 */
export async function publishCatalogEvent(
  nc: NatsConnection,
  event: { org_id: number; entity: string; verb: string },
  msgId: string,
): Promise<void> {
  const ack = await jetstream(nc).publish(catalogEventSubject(event.org_id, event.entity, event.verb), encodeJson(event), { msgID: msgId });
  announceCatalogWrite(nc, event.org_id, ack.seq);
  await nc.flush();
}

/** Every message a stream holds on subjects matching the filter, oldest first (an ordered, unacked read). */
export async function readStream(
  nc: NatsConnection,
  stream: string,
  filter?: string,
): Promise<Array<{ subject: string; data: Uint8Array; headers: Record<string, string> }>> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  const out: Array<{ subject: string; data: Uint8Array; headers: Record<string, string> }> = [];
  if (info.state.messages === 0) return out;
  const consumer = await jetstream(nc).consumers.get(stream, {
    ...(filter ? { filter_subjects: filter } : {}),
    deliver_policy: DeliverPolicy.All,
  });
  const pattern = filter ? new RegExp(`^${filter.replace(/\./g, "\\.").replace(/\*/g, "[^.]+").replace(/>$/, ".+")}$`) : /.*/;
  for (;;) {
    const msg: JsMsg | null = await consumer.next({ expires: 1000 });
    if (!msg) break;
    const headers: Record<string, string> = {};
    for (const [k, v] of msg.headers ?? []) headers[k] = v.join(",");
    if (pattern.test(msg.subject)) out.push({ subject: msg.subject, data: msg.data, headers });
    if (msg.info.pending === 0) break;
  }
  await consumer.delete().catch(() => undefined);
  return out;
}

/** What a consumer (by durable) dead-lettered, oldest first: reason, detail, the original subject and payload. */
export async function readDeadLetters(nc: NatsConnection, durable: string) {
  const messages = await readStream(nc, STREAMS.DEAD_LETTERS.name, deadLetterSubject(durable));
  return messages.map((m) => ({
    reason: m.headers[DLQ_REASON_HEADER],
    detail: m.headers[DLQ_DETAIL_HEADER],
    subject: m.headers[DLQ_SUBJECT_HEADER],
    text: new TextDecoder().decode(m.data),
  }));
}

/** An RPC request envelope as the gateway sends it, for tests that call handlers over NATS. */
export const testRpcRequest = (overrides: Partial<RpcRequest> = {}): RpcRequest => ({
  request_id: "req-1",
  principal: { key_id: 1, org_id: 1, scopes: [] },
  method: "GET",
  route: "/api/v1/assets",
  path: "/api/v1/assets",
  params: {},
  query: {},
  ...overrides,
});
