/**
 * NATS helpers: a reconnecting connection, RPC services that always answer,
 * RPC calls that never hang, and the JetStream streams every service expects.
 */
import { connect, headers as natsHeaders, type MsgHdrs, type NatsConnection, type Msg } from "@nats-io/transport-node";
import {
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  DiscardPolicy,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import type { Logger } from "pino";
import { checkDeadline, rpcDeadline, runWithDeadline } from "./deadline.ts";
import { AppError, serviceUnavailable, toErrorEnvelope } from "./errors.ts";
import { fitListReply, replyHeaderRoom } from "./reply-size.ts";
import { HEADER_REQUEST_ID, HEADER_TRACEPARENT, RpcReply, RpcRequest } from "./rpc.ts";
import type { Metrics } from "./metrics.ts";
import { PING_OPERATION, rpcSubject, STREAMS, type ServiceName } from "./subjects.ts";
import { formatTraceparent, newTrace, parseTraceparent } from "./tracing.ts";

export type { NatsConnection, MsgHdrs };

const encoder = new TextEncoder();
const decoder = new TextDecoder();
export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeJson = (data: Uint8Array): unknown => JSON.parse(decoder.decode(data));

export async function connectNats(options: {
  url: string;
  name: string;
  logger: Logger;
  user?: string | undefined;
  pass?: string | undefined;
}): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.url.split(","),
    name: options.name,
    ...(options.user ? { user: options.user, pass: options.pass ?? "" } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
  });
  connected.set(nc, true);
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
      reply = await runWithDeadline(parsed.data.deadline, () => handler(parsed.data, { logger: log, traceparent }));
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
    const replyHeaders = messageHeaders(requestId, traceparent);
    try {
      let payload = encodeJson(reply);
      // A list page too large for the broker is cut to the rows that fit (reply-size.ts).
      const room = (nc.info?.max_payload ?? Infinity) - replyHeaderRoom(requestId);
      if (payload.length > room) payload = fitListReply(reply, room) ?? payload;
      msg.respond(payload, { headers: replyHeaders });
    } catch (err) {
      // E.g. a reply larger than the broker's max_payload: still answer.
      log.error({ err }, "rpc reply could not be sent");
      const envelope = toErrorEnvelope(err, { instance, request_id: requestId });
      try {
        msg.respond(encodeJson({ status: envelope.error.status, headers: {}, body: envelope }), { headers: replyHeaders });
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

/**
 * Calls a service; a timeout or no responder becomes 503 service_unavailable
 * (with Retry-After), a request too large for the broker 413, and a reply
 * that is not an RpcReply an internal error. The request carries a deadline
 * ahead of the timeout (deadline.ts), so that no write commits after the
 * caller has answered 503.
 */
export async function callRpc(
  nc: NatsConnection,
  subject: string,
  request: RpcRequest,
  options: { timeoutMs: number; traceparent?: string },
): Promise<RpcReply> {
  let msg: Msg;
  try {
    const sent = request.deadline === undefined ? { ...request, deadline: rpcDeadline(options.timeoutMs) } : request;
    msg = await nc.request(subject, encodeJson(sent), {
      timeout: options.timeoutMs,
      headers: messageHeaders(request.request_id, options.traceparent),
    });
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (err instanceof Error && /max_payload/i.test(err.message)) {
      throw new AppError("payload_too_large", "Request is too large to forward", { cause: err });
    }
    throw serviceUnavailable(`The ${subject.split(".")[0]} service did not answer`, 1);
  }
  let decoded: unknown;
  try {
    decoded = decodeJson(msg.data);
  } catch (err) {
    throw new Error(`Reply on ${subject} is not JSON`, { cause: err });
  }
  const parsed = RpcReply.safeParse(decoded);
  if (!parsed.success) throw new Error(`Reply on ${subject} is not an RPC reply`, { cause: parsed.error });
  return parsed.data;
}

/** True when the service answers its ping within the timeout. */
export async function pingService(nc: NatsConnection, service: ServiceName, timeoutMs: number): Promise<boolean> {
  try {
    const msg = await nc.request(rpcSubject(service, PING_OPERATION), encodeJson({}), { timeout: timeoutMs });
    return RpcReply.safeParse(decodeJson(msg.data)).success;
  } catch {
    return false;
  }
}

/** The streams every service relies on, created or updated idempotently. */
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
        if (!(addErr instanceof Error) || !/already in use/i.test(addErr.message)) throw addErr;
        await jsm.streams.update(config.name, config);
      }
    }
  }
  return jsm;
}

function isNotFound(err: unknown): boolean {
  return err instanceof Error && /not found/i.test(err.message);
}
