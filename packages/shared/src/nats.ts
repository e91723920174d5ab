/**
 * NATS helpers: a reconnecting connection, RPC services that always answer,
 * RPC calls that never hang, and the JetStream streams every service expects.
 */
import { connect, createInbox, headers as natsHeaders, type MsgHdrs, type NatsConnection, type Msg } from "@nats-io/transport-node";
import {
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  DiscardPolicy,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import type { Logger } from "pino";
import { z } from "zod";
import { checkDeadline, rpcDeadline, runWithDeadline } from "./deadline.ts";
import { AppError, serviceUnavailable, toErrorEnvelope } from "./errors.ts";
import { fitListReply, replyHeaderRoom } from "./reply-size.ts";
import {
  HEADER_REQUEST_ID,
  HEADER_RPC_HEADERS,
  HEADER_RPC_STATUS,
  HEADER_TRACEPARENT,
  JsonText,
  type RpcReply,
  RpcRequest,
  type RawRpcReply,
} from "./rpc.ts";
import type { Metrics } from "./metrics.ts";
import { logicalSubject, PING_OPERATION, rpcSubject, STREAMS, type ServiceName } from "./subjects.ts";
import { formatTraceparent, newTrace, parseTraceparent } from "./tracing.ts";
import { coalesceNatsWrites } from "./nats-write-coalescing.ts";

export type { NatsConnection, MsgHdrs };

const decoder = new TextDecoder();
/**
 * Text as UTF-8 bytes for a message. Buffer.from, not TextEncoder: on Node 20
 * TextEncoder.encode costs about 4 ns a byte (375 us for a 90 KB positions
 * message), Buffer.from about a tenth of that. A Buffer is a Uint8Array.
 */
export const utf8Bytes = (text: string): Uint8Array => Buffer.from(text, "utf8");
export const encodeJson = (value: unknown): Uint8Array => utf8Bytes(JSON.stringify(value));
export const decodeJson = (data: Uint8Array): unknown => JSON.parse(decoder.decode(data));

export async function connectNats(options: {
  url: string;
  name: string;
  logger: Logger;
  user?: string | undefined;
  pass?: string | undefined;
  /**
   * One socket write per event-loop turn, for every NATS connection of the
   * process (nats-write-coalescing.ts). For processes whose turns are short
   * (the gateway: HTTP in, NATS out); where consumer batches are parsed, a turn
   * can last tens of milliseconds and the cork would hold RPC replies behind it.
   */
  coalesceWrites?: boolean;
}): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.url.split(","),
    name: options.name,
    ...(options.user ? { user: options.user, pass: options.pass ?? "" } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    // No Error (and stack capture) built up front for every request: it cost
    // the gateway 8% of its CPU, and a timeout is mapped to 503 regardless.
    noAsyncTraces: true,
  });
  connected.set(nc, true);
  if (options.coalesceWrites && !coalesceNatsWrites(nc)) options.logger.warn("nats.js transport not recognised: NATS writes are not coalesced");
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") connected.set(nc, false);
      if (status.type === "reconnect") connected.set(nc, true);
      if (status.type === "disconnect" || status.type === "reconnect" || status.type === "error") {
        options.logger.warn({ nats: status.type }, "nats connection status");
      }
    }
  })();
  return nc;
}

const connected = new WeakMap<NatsConnection, boolean>();

/** Connected now (not closed, not between a disconnect and a reconnect). */
export function natsConnected(nc: NatsConnection): boolean {
  return !nc.isClosed() && connected.get(nc) !== false;
}

export function messageHeaders(requestId: string, traceparent?: string): MsgHdrs {
  const h = natsHeaders();
  h.set(HEADER_REQUEST_ID, requestId);
  if (traceparent) h.set(HEADER_TRACEPARENT, traceparent);
  return h;
}

/**
 * `logger` carries request_id, operation and trace_id; `traceparent` is the
 * caller's (a new trace when it sent none), to pass on to further calls.
 */
export type RpcHandler = (request: RpcRequest, context: { logger: Logger; traceparent?: string }) => Promise<RpcReply>;

export interface RpcServer {
  /** Stop taking requests and wait for the ones in flight. */
  stop(): Promise<void>;
  inFlight(): number;
}

/**
 * Serves `<service>.<operation>` for each handler (plus `<service>.ping`), in
 * the service's queue group so replicas share the load. Every request gets a
 * reply: a handler that throws answers with the error envelope, never silence.
 * With `metrics`, each answer is counted and timed per subject and status.
 */
export function serveRpc(
  nc: NatsConnection,
  service: ServiceName,
  handlers: Record<string, RpcHandler>,
  logger: Logger,
  options: { metrics?: Metrics } = {},
): RpcServer {
  const { metrics } = options;
  let inFlight = 0;
  const idle: Array<() => void> = [];
  const all: Record<string, RpcHandler> = {
    [PING_OPERATION]: async () => ({ status: 200, headers: {}, body: { ok: true, service } }),
    ...handlers,
  };
  const subs = Object.entries(all).map(([operation, handler]) =>
    nc.subscribe(rpcSubject(service, operation), {
      queue: service,
      callback: (err, msg) => {
        if (err) {
          logger.error({ err, operation }, "rpc subscription error");
          return;
        }
        inFlight++;
        void answer(msg, operation, handler)
          .catch((err: unknown) => logger.error({ err, operation }, "rpc answer failed"))
          .finally(() => {
            inFlight--;
            if (inFlight === 0) idle.splice(0).forEach((resolve) => resolve());
          });
      },
    }),
  );

  async function answer(msg: Msg, operation: string, handler: RpcHandler): Promise<void> {
    const started = performance.now();
    const requestId = msg.headers?.get(HEADER_REQUEST_ID) || "unknown";
    // A caller without a (valid) trace still gets one, so the logs join up.
    const trace = parseTraceparent(msg.headers?.get(HEADER_TRACEPARENT)) ?? newTrace();
    const traceparent = formatTraceparent(trace);
    const log = logger.child({ request_id: requestId, operation, trace_id: trace.traceId });
    let reply: RpcReply;
    let instance = "";
    try {
      const parsed = RpcRequest.safeParse(decodeJson(msg.data));
      if (!parsed.success) throw new AppError("bad_request", "Malformed RPC envelope");
      instance = parsed.data.path;
      // A caller that has given up already gets no work done for it.
      checkDeadline(parsed.data.deadline);
      // Only writes need the deadline at COMMIT; reads skip the async context it costs.
      const deadline = parsed.data.method === "GET" ? undefined : parsed.data.deadline;
      reply = await runWithDeadline(deadline, () => handler(parsed.data, { logger: log, traceparent }));
    } catch (err) {
      if (!(err instanceof AppError)) log.error({ err }, "rpc handler failed");
      const envelope = toErrorEnvelope(err, { instance, request_id: requestId });
      reply = {
        status: envelope.error.status,
        headers: err instanceof AppError ? err.headers : {},
        body: envelope,
      };
    }
    const seconds = (performance.now() - started) / 1000;
    log.debug({ status: reply.status, duration_ms: Math.round(seconds * 1000) }, "rpc answered");
    if (metrics) {
      const labels = { subject: msg.subject, status: String(reply.status) };
      metrics.rpcRequests.inc(labels);
      metrics.rpcDuration.observe(labels, seconds);
    }
    if (!msg.reply) return;
    try {
      respondRpc(msg, reply, requestId, traceparent, (nc.info?.max_payload ?? Infinity) - replyHeaderRoom(requestId));
    } catch (err) {
      // E.g. a reply larger than the broker's max_payload: still answer.
      log.error({ err }, "rpc reply could not be sent");
      const envelope = toErrorEnvelope(err, { instance, request_id: requestId });
      try {
        respondRpc(msg, { status: envelope.error.status, headers: {}, body: envelope }, requestId, traceparent);
      } catch (again) {
        log.error({ err: again }, "rpc error reply could not be sent");
      }
    }
  }

  return {
    inFlight: () => inFlight,
    async stop() {
      // Drain, not unsubscribe: requests the server already sent are still answered.
      await Promise.all(subs.map((sub) => settle(nc, sub.drain(), () => sub.isClosed() || sub.unsubscribe())));
      if (inFlight > 0) await new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}

/**
 * Runs a drain (which needs the server to answer a flush), unless NATS is
 * unreachable now or the drain takes longer than `timeoutMs`: then `fallback`.
 */
async function settle(nc: NatsConnection, drain: Promise<void>, fallback: () => unknown, timeoutMs = 5000): Promise<void> {
  if (!natsConnected(nc)) {
    drain.catch(() => undefined);
    await fallback();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([
    drain.then(
      () => true,
      () => false,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  if (!done) await fallback();
}

/**
 * Shutdown's last NATS step: drains the connection (subscriptions finish what
 * they hold, pending publishes and acks are flushed), or closes it when the
 * server is unreachable, so a shutdown never waits for a broker that is down.
 */
export async function drainNats(nc: NatsConnection, timeoutMs = 5000): Promise<void> {
  if (nc.isClosed()) return;
  const drain = nc.isDraining() ? nc.closed().then(() => undefined) : nc.drain();
  await settle(nc, drain, () => nc.close().catch(() => undefined), timeoutMs);
}

const EMPTY = new Uint8Array(0);

/**
 * Answers an RPC request (see HEADER_RPC_STATUS for the wire form). A list
 * page larger than `maxBytes` is cut to the rows that fit (reply-size.ts).
 */
export function respondRpc(msg: Msg, reply: RpcReply, requestId: string, traceparent?: string, maxBytes = Infinity): void {
  const headers = messageHeaders(requestId, traceparent);
  headers.set(HEADER_RPC_STATUS, String(reply.status));
  const names = Object.keys(reply.headers);
  if (names.length) headers.set(HEADER_RPC_HEADERS, JSON.stringify(reply.headers));
  const { body } = reply;
  let data = body === undefined ? EMPTY : body instanceof JsonText ? utf8Bytes(body.text) : encodeJson(body);
  if (data.length > maxBytes) data = fitListReply(body instanceof JsonText ? JSON.parse(body.text) : body, maxBytes) ?? data;
  msg.respond(data, { headers });
}

/** The HTTP headers an RPC reply carries (Location, Retry-After, ...), by name. Built once: zod schemas cost to make. */
const RpcReplyHeaders = z.record(z.string(), z.string());

/** Reads an RPC reply message without decoding its body; throws when it is not one. */
export function readRpcReply(msg: Msg, subject: string): RawRpcReply {
  const status = Number(msg.headers?.get(HEADER_RPC_STATUS));
  if (!Number.isInteger(status) || status < 100 || status > 599) throw new Error(`Reply on ${subject} is not an RPC reply`);
  const rawHeaders = msg.headers?.get(HEADER_RPC_HEADERS);
  let headers: Record<string, string> = {};
  if (rawHeaders) {
    const parsed = RpcReplyHeaders.safeParse(JSON.parse(rawHeaders));
    if (!parsed.success) throw new Error(`Reply on ${subject} has malformed headers`);
    headers = parsed.data;
  }
  return { status, headers, payload: msg.data.length ? msg.data : undefined };
}

/** An RPC reply message with its body decoded (tests, tools, anything not on the hot path). */
export function decodeRpcReply(msg: Msg, subject = msg.subject): RpcReply {
  const raw = readRpcReply(msg, subject);
  let body: unknown;
  if (raw.payload) {
    try {
      body = decodeJson(raw.payload);
    } catch (err) {
      throw new Error(`Reply on ${subject} is not JSON`, { cause: err });
    }
  }
  return { status: raw.status, headers: raw.headers, ...(body === undefined ? {} : { body }) };
}

/** Calls a service and decodes the reply's body; see callRpcRaw. */
export async function callRpc(
  nc: NatsConnection,
  subject: string,
  request: RpcRequest,
  options: { timeoutMs: number; traceparent?: string },
): Promise<RpcReply> {
  return decodeRpcReply(await requestRpc(nc, subject, request, options), subject);
}

/**
 * Calls a service; a timeout or no responder becomes 503 service_unavailable
 * (with Retry-After), a request too large for the broker 413, and a reply
 * that is not an RPC reply an internal error. The body stays bytes.
 */
export async function callRpcRaw(
  nc: NatsConnection,
  subject: string,
  request: RpcRequest,
  options: { timeoutMs: number; traceparent?: string },
): Promise<RawRpcReply> {
  return readRpcReply(await requestRpc(nc, subject, request, options), subject);
}

/**
 * Request/reply over one wildcard inbox subscription per connection, with
 * replies matched by token. nats.js's own `request()` builds two Error objects
 * (with stack traces) per call even when nothing fails, which cost the
 * gateway about 5% of its CPU; this does only the bookkeeping.
 */
class Requester {
  private readonly prefix: string;
  private readonly pending = new Map<string, { resolve: (msg: Msg) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }>();
  private next = 0;

  constructor(private readonly nc: NatsConnection) {
    this.prefix = `${createInbox()}.`;
    nc.subscribe(`${this.prefix}*`, {
      callback: (err, msg) => {
        if (err) return;
        const token = msg.subject.slice(this.prefix.length);
        const waiting = this.pending.get(token);
        if (!waiting) return;
        this.pending.delete(token);
        clearTimeout(waiting.timer);
        // The server's "no responders" status: nobody listens on the subject.
        if (msg.data.length === 0 && msg.headers?.code === 503) waiting.reject(new Error("no responders"));
        else waiting.resolve(msg);
      },
    });
  }

  request(subject: string, data: Uint8Array, options: { timeoutMs: number; headers: MsgHdrs }): Promise<Msg> {
    const token = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(token);
        reject(new Error("timeout"));
      }, options.timeoutMs);
      this.pending.set(token, { resolve, reject, timer });
      try {
        this.nc.publish(subject, data, { reply: `${this.prefix}${token}`, headers: options.headers });
      } catch (err) {
        this.pending.delete(token);
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }
}

const requesters = new WeakMap<NatsConnection, Requester>();

/**
 * A request on the connection's one wildcard inbox (Requester): resolves with
 * the reply; fails with Error("no responders") when nobody listens on the
 * subject, Error("timeout") without a reply in time.
 */
export function requestReply(nc: NatsConnection, subject: string, data: Uint8Array, options: { timeoutMs: number; headers: MsgHdrs }): Promise<Msg> {
  let requester = requesters.get(nc);
  if (!requester) requesters.set(nc, (requester = new Requester(nc)));
  return requester.request(subject, data, options);
}

async function requestRpc(
  nc: NatsConnection,
  subject: string,
  request: RpcRequest,
  options: { timeoutMs: number; traceparent?: string },
): Promise<Msg> {
  // Writes carry a deadline ahead of the timeout (deadline.ts): none commits after the caller answered 503.
  const sent = request.deadline === undefined ? { ...request, deadline: rpcDeadline(options.timeoutMs) } : request;
  try {
    return await requestReply(nc, subject, encodeJson(sent), {
      timeoutMs: options.timeoutMs,
      headers: messageHeaders(request.request_id, options.traceparent),
    });
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (err instanceof Error && /max_payload|payload exceeded/i.test(err.message)) {
      throw new AppError("payload_too_large", "Request is too large to forward", { cause: err });
    }
    throw serviceUnavailable(`The ${logicalSubject(subject).split(".")[0]} service did not answer`, 1);
  }
}

/** True when the service answers its ping within the timeout. */
export async function pingService(nc: NatsConnection, service: ServiceName, timeoutMs: number): Promise<boolean> {
  try {
    const msg = await nc.request(rpcSubject(service, PING_OPERATION), encodeJson({}), { timeout: timeoutMs });
    // Any well-formed reply means the service is there and answering.
    readRpcReply(msg, msg.subject);
    return true;
  } catch {
    return false;
  }
}

/**
 * The streams every service relies on, created or updated idempotently. A
 * process entry binds them to its deployment first (deployment.ts).
 */
export function streamConfigs(replicas = 1): Array<Partial<StreamConfig> & { name: string }> {
  const common = {
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    duplicate_window: 2 * 60 * 1_000_000_000,
    num_replicas: replicas,
  };
  return [
    {
      ...common,
      name: STREAMS.CATALOG.name,
      subjects: [...STREAMS.CATALOG.subjects],
      retention: RetentionPolicy.Limits,
      // Replicas are rebuilt from this stream, so it keeps every event.
      max_age: 0,
    },
    {
      ...common,
      name: STREAMS.TRACKING.name,
      subjects: [...STREAMS.TRACKING.subjects],
      retention: RetentionPolicy.Limits,
      max_age: 0,
    },
    {
      ...common,
      name: STREAMS.SCANS.name,
      subjects: [...STREAMS.SCANS.subjects],
      retention: RetentionPolicy.Limits,
      // Full means publishers are refused (and readers retry), never that
      // unprocessed scans are silently dropped.
      discard: DiscardPolicy.New,
      max_age: 7 * 24 * 3600 * 1_000_000_000,
      max_bytes: 8 * 1024 ** 3,
    },
    {
      ...common,
      name: STREAMS.SCANS_DLQ.name,
      retention: RetentionPolicy.Limits,
      max_age: 30 * 24 * 3600 * 1_000_000_000,
      sources: [{ name: STREAMS.SCANS.name, filter_subject: STREAMS.SCANS_DLQ.sourceFilter }],
    },
    {
      ...common,
      name: STREAMS.DEAD_LETTERS.name,
      subjects: [...STREAMS.DEAD_LETTERS.subjects],
      retention: RetentionPolicy.Limits,
      max_age: 30 * 24 * 3600 * 1_000_000_000,
    },
  ];
}

export async function ensureStreams(nc: NatsConnection, options: { replicas?: number } = {}): Promise<JetStreamManager> {
  const jsm = await jetstreamManager(nc);
  for (const config of streamConfigs(options.replicas ?? 1)) {
    try {
      await jsm.streams.info(config.name);
      await jsm.streams.update(config.name, config);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await jsm.streams.add(config);
      } catch (addErr) {
        // Replicas booting together race to create it; the loser updates instead.
        // The server names that race "already in use" or, while the winner's
        // stream is being created, "subjects overlap": the latter only when a
        // stream of this name now exists (else another stream holds the subjects).
        if (!(addErr instanceof Error) || !/already in use|subjects overlap/i.test(addErr.message)) throw addErr;
        if (/subjects overlap/i.test(addErr.message)) await jsm.streams.info(config.name).catch(() => Promise.reject(addErr));
        await jsm.streams.update(config.name, config);
      }
    }
  }
  return jsm;
}

function isNotFound(err: unknown): boolean {
  return err instanceof Error && /not found/i.test(err.message);
}
