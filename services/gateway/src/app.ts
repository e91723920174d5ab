/**
 * The HTTP edge. Every request goes through the same steps, in this order:
 * request id, authentication (401), rate limit (429), route and method
 * (404/405), scope (403), organization context (403/422), path ids (400);
 * then the body: size (413), media type (415), JSON (400); then forwarding
 * as an RPC envelope to `<service>.<operation>`, whose reply is rendered as is.
 * `/healthz` and `/readyz` sit outside that pipeline: no key, no rate limit.
 * Every request continues the caller's W3C trace (or starts one): its log
 * lines carry trace_id and the RPC carries the `traceparent` header.
 */
import { METHODS, type IncomingMessage } from "node:http";
import Fastify, { LogController, type FastifyReply, type FastifyRequest } from "fastify";
import {
  AppError,
  badRequest,
  callRpcRaw,
  continueTrace,
  createMetrics,
  forbidden,
  formatTraceparent,
  isOrgsMePath,
  natsConnected,
  newRequestId,
  notFound,
  parsePathId,
  pingService,
  requireOrg,
  rpcSubject,
  serviceUnavailable,
  SERVICES,
  toErrorEnvelope,
  toWireTimestamp,
  ValidationError,
  type FieldError,
  type CatalogWatermarks,
  type Logger,
  type Metrics,
  type NatsConnection,
  type Principal,
  type RawRpcReply,
  type RpcReply,
  type RpcRequest,
  type TraceContext,
} from "@whereabouts/shared";
import { allowedMethods, ROUTES, type RouteMethod, type RouteOperation, type RouteSpec } from "./routes/route-table.ts";
import type { AuthService } from "./identity/auth-service.ts";
import type { IdentityStore } from "./identity/identity-store.ts";
import type { RateLimiter } from "./plugins/rate-limiter.ts";
import { answerClientError, answerConnect } from "./http/client-error.ts";
import { registerHandheld, type HandheldOptions } from "./handheld/handheld-routes.ts";
import { createBulkUploads } from "./bulk/bulk-upload.ts";
import { jetstream } from "@nats-io/jetstream";
import { BODY_LIMIT_BYTES, checkContentType, decodeJsonBody, parseQueryString, unsupportedMediaType } from "./http/http-rules.ts";

export interface GatewayDeps {
  logger: Logger;
  nc: NatsConnection;
  auth: AuthService;
  identity: Pick<
    IdentityStore,
    "findOrganization" | "findUserByEmail" | "createSession" | "revokeSession" | "countLoginFailures" | "recordLoginFailure"
  >;
  rateLimiter: RateLimiter;
  rateLimit: { max: number; windowMs: number };
  rpcTimeoutMs: number;
  readyTimeoutMs: number;
  /** Each organization's newest catalog write: reads carry it (read-your-writes). */
  watermarks: Pick<CatalogWatermarks, "seqFor"> & Partial<Pick<CatalogWatermarks, "settled">>;
  /** HTTP and rate-limit metrics; default: a registry of its own. */
  metrics?: Metrics;
  /** Sessions of the handheld page (EXTENSIONS.md section 1); default: 12 h, cookies without Secure. */
  handheld?: Partial<HandheldOptions>;
}

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    operation?: RouteOperation;
  }
}

/**
 * Every method Node's HTTP parser accepts (CONNECT is a tunnel, never a
 * request): registered on each route so that any unsupported one is a 405
 * with Allow, not a 404.
 */
const ROUTE_METHODS = METHODS.filter((m) => m !== "CONNECT");
const PROBE_ALLOW = "GET, HEAD";

interface RouteConfig {
  /** Health probes: no key, no rate limit. */
  probe?: boolean;
  /** The handheld page and its API: their own authentication (handheld-routes.ts). */
  handheld?: boolean;
}

/** Each request's trace context: the caller's trace (or a new one), with the gateway's span. */
const traces = new WeakMap<IncomingMessage, TraceContext>();
function traceOf(raw: IncomingMessage): TraceContext {
  let trace = traces.get(raw);
  if (!trace) {
    const sent = raw.headers.traceparent;
    trace = continueTrace(typeof sent === "string" ? sent : undefined);
    traces.set(raw, trace);
  }
  return trace;
}

export async function buildGateway(deps: GatewayDeps) {
  let closing = false;
  const metrics = deps.metrics ?? createMetrics({ service: "gateway" });
  const app = Fastify({
    loggerInstance: deps.logger,
    // Every request's log lines carry its trace id.
    childLoggerFactory: (logger, bindings, opts, raw) =>
      logger.child({ ...bindings, trace_id: traceOf(raw as IncomingMessage).traceId }, opts),
    logController: new LogController({
      requestIdLogLabel: "request_id",
      disableRequestLogging: (request) => request.url === "/healthz" || request.url === "/readyz",
    }),
    bodyLimit: BODY_LIMIT_BYTES,
    // Requests the HTTP parser refuses get the envelope too (client-error.ts), and a
    // missing Host is answered by the onRequest hook below, not by Node's bare 400.
    clientErrorHandler: answerClientError,
    http: { requireHostHeader: false },
    exposeHeadRoutes: false,
    // Requests arriving while closing get the spec's envelope (below), not Fastify's.
    return503OnClosing: false,
    requestIdHeader: false,
    // Path ids longer than Fastify's default 100 characters are still ids: 400 too_large, not 414.
    routerOptions: { maxParamLength: 4096 },
    genReqId: (req) => {
      const sent = req.headers["x-request-id"];
      return typeof sent === "string" && sent !== "" ? sent : newRequestId();
    },
    // A path that is not valid percent-encoding never reaches a route.
    frameworkErrors: (err, request, reply) => {
      reply.header("x-request-id", request.id);
      guard(request, reply).then(
        () => sendError(request, reply, badRequest(`The request path is not valid: ${err.message}`)),
        (guardErr: unknown) => sendError(request, reply, guardErr),
      );
    },
  });

  for (const method of ROUTE_METHODS) {
    if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
  }
  // CONNECT never reaches a route (Node hands it over as a tunnel): it gets the envelope too.
  app.server.on("connect", answerConnect);

  // Bodies are read raw and decoded by the handler, after the checks above.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  // Multipart is the bulk upload's (up to 64 MiB, streamed by its handler); anywhere else it is read
  // like any body, within the 1 MiB limit, and refused with 415 by the route.
  app.addContentTypeParser("multipart/form-data", (request, payload, done) => {
    if (request.routeOptions.url === "/api/v1/assets/bulk") return done(null, undefined);
    let size = 0;
    const chunks: Buffer[] = [];
    payload.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= BODY_LIMIT_BYTES) chunks.push(chunk);
    });
    payload.on("end", () => (size > BODY_LIMIT_BYTES ? done(new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`)) : done(null, Buffer.concat(chunks))));
    payload.on("error", (err) => done(err));
  });

  app.addHook("preClose", async () => {
    closing = true;
  });
  // Responses finished while closing end their keep-alive connection, so close() completes.
  app.addHook("onSend", async (_request, reply) => {
    if (closing) reply.header("connection", "close");
  });

  // Counted per route pattern (never the raw path: ids would explode the series).
  app.addHook("onResponse", async (request, reply) => {
    const labels = { method: request.method, route: request.routeOptions.url ?? "unmatched", status: String(reply.statusCode) };
    metrics.httpRequests.inc(labels);
    metrics.httpDuration.observe(labels, reply.elapsedTime / 1000);
  });

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    if (request.raw.httpVersion === "1.1" && request.headers.host === undefined) {
      throw badRequest("An HTTP/1.1 request needs a Host header");
    }
    if (closing) {
      reply.header("connection", "close");
      throw serviceUnavailable("The gateway is shutting down; retry on another instance", 1);
    }
    const config = request.routeOptions.config as RouteConfig | undefined;
    if (config?.probe || config?.handheld) return;
    await guard(request, reply);
  });

  function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown) {
    const mapped = fromFrameworkError(err, request.method);
    const envelope = toErrorEnvelope(mapped, { instance: pathOf(request), request_id: request.id });
    if (envelope.error.status >= 500 && !(mapped instanceof AppError)) {
      request.log.error({ err, request_id: request.id }, "request failed");
    }
    if (mapped instanceof AppError) for (const [name, value] of Object.entries(mapped.headers)) reply.header(name, value);
    return reply.code(envelope.error.status).header("content-type", "application/json").send(Buffer.from(JSON.stringify(envelope)));
  }

  app.setErrorHandler((err, request, reply) => sendError(request, reply, err));

  /* Authentication, then the rate limit: every request but the probes, before routing. */
  async function guard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    let bucket = `ip:${request.ip}`;
    let limit = deps.rateLimit.max;
    let authError: unknown;
    try {
      const authenticated = await deps.auth.authenticate(request.headers.authorization);
      request.principal = authenticated.principal;
      bucket = authenticated.bucket;
      limit = authenticated.rateLimit ?? deps.rateLimit.max;
    } catch (err) {
      authError = err;
    }
    await rateLimit(request, reply, bucket, limit, authError);
  }

  /** Counts the request in its bucket, sets the RateLimit headers; an authentication error goes first. */
  async function rateLimit(request: FastifyRequest, reply: FastifyReply, bucket: string, limit: number, authError?: unknown): Promise<void> {
    const rl = await deps.rateLimiter.hit(bucket, limit);
    const resetSeconds = Math.max(1, Math.ceil(rl.resetMs / 1000));
    reply.header("ratelimit-limit", String(rl.limit));
    reply.header("ratelimit-remaining", String(rl.remaining));
    reply.header("ratelimit-reset", String(resetSeconds));
    if (authError) {
      if (authError instanceof AppError && authError.type === "unauthorized") reply.header("www-authenticate", "Bearer");
      throw authError;
    }
    if (!rl.allowed) {
      metrics.rateLimited.inc({ key_id: String(request.principal?.key_id ?? "none") });
      reply.header("retry-after", String(resetSeconds));
      throw new AppError("rate_limited", `Rate limit of ${rl.limit} requests per window exceeded`);
    }
  }

  // The instance's logger type differs from Fastify's default; the routes need neither.
  registerHandheld({ route: (options) => app.route(options as never) }, {
    auth: deps.auth,
    identity: deps.identity,
    nc: deps.nc,
    js: jetstream(deps.nc),
    rpcTimeoutMs: deps.rpcTimeoutMs,
    options: { sessionTtlS: deps.handheld?.sessionTtlS ?? 43_200, cookieSecure: deps.handheld?.cookieSecure ?? false },
    limit: (request, reply, bucket, max) => rateLimit(request, reply, bucket, max ?? deps.rateLimit.max),
  });

  const probeMethods = (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method === "GET" || request.method === "HEAD") return;
    reply.header("allow", PROBE_ALLOW);
    throw new AppError("method_not_allowed", `Allowed methods: ${PROBE_ALLOW}`);
  };

  app.route({
    method: ROUTE_METHODS,
    url: "/healthz",
    config: { probe: true } satisfies RouteConfig,
    handler: async (request, reply) => {
      probeMethods(request, reply);
      return reply.header("content-type", "application/json").send(Buffer.from(JSON.stringify({ status: "ok" })));
    },
  });

  app.route({
    method: ROUTE_METHODS,
    url: "/readyz",
    config: { probe: true } satisfies RouteConfig,
    handler: async (request, reply) => {
      probeMethods(request, reply);
      const nats = natsConnected(deps.nc);
      const services = nats
        ? await Promise.all(SERVICES.map((s) => pingService(deps.nc, s, deps.readyTimeoutMs)))
        : SERVICES.map(() => false);
      const checks: Record<string, boolean> = { nats, ...Object.fromEntries(SERVICES.map((s, i) => [s, services[i]!])) };
      if (nats && services.every(Boolean)) {
        return reply.header("content-type", "application/json").send(Buffer.from(JSON.stringify({ status: "ready", checks })));
      }
      const down = Object.entries(checks).filter(([, ok]) => !ok).map(([name]) => name);
      throw serviceUnavailable(`Not ready: ${down.join(", ")} not answering`, 1);
    },
  });

  for (const route of ROUTES) {
    app.route({
      method: ROUTE_METHODS,
      url: route.path,
      onRequest: async (request, reply) => {
        request.operation = resolveOperation(route, request, reply);
      },
      handler: async (request, reply) => forward(route, request, reply),
    });
  }

  app.setNotFoundHandler(async (request) => {
    throw notFound(`No resource at ${pathOf(request)}`);
  });

  function resolveOperation(route: RouteSpec, request: FastifyRequest, reply: FastifyReply): RouteOperation {
    const method = (request.method === "HEAD" ? "GET" : request.method) as RouteMethod;
    const operation = Object.hasOwn(route.methods, method) ? route.methods[method] : undefined;
    if (!operation) {
      const allow = allowedMethods(route).join(", ");
      reply.header("allow", allow);
      throw new AppError("method_not_allowed", `Allowed methods: ${allow}`);
    }
    const principal = request.principal!;
    if (operation.scope && !principal.scopes.includes(operation.scope)) {
      throw forbidden(`This operation requires the ${operation.scope} scope`);
    }
    requireOrg(principal, isOrgsMePath(route.path) ? "orgs/me" : "other");
    const params = request.params as Record<string, string>;
    const fields: FieldError[] = [];
    for (const name of route.params) {
      try {
        parsePathId(name, params[name]);
      } catch (err) {
        if (err instanceof ValidationError) fields.push(...err.fields);
        else throw err;
      }
    }
    if (fields.length) throw new ValidationError(fields);
    return operation;
  }

  async function forward(route: RouteSpec, request: FastifyRequest, reply: FastifyReply) {
    const operation = request.operation!;
    const principal = request.principal!;
    const envelopeOf = (body: unknown): RpcRequest => ({
      request_id: request.id,
      principal,
      method: request.method === "HEAD" ? "GET" : request.method,
      route: route.path,
      path: pathOf(request),
      params: request.params as Record<string, string>,
      query: queryOf(request),
      body,
      catalog_seq: deps.watermarks.seqFor(principal.org_id),
    });
    // Bulk upload: multipart, streamed to the object store (bulk-upload.ts), not a JSON body.
    if (operation.operation === "asset.bulk") return render(request, reply, await bulk.upload(request.raw, envelopeOf(undefined)));
    if (operation.operation === "asset.list" && wantsCsv(request.headers.accept)) {
      const csv = await bulk.exportCsv(envelopeOf(undefined));
      reply.header("content-type", "text/csv; charset=utf-8").header("content-disposition", 'attachment; filename="assets.csv"');
      return reply.send(request.method === "HEAD" ? undefined : csv);
    }
    const raw = request.body as Buffer | undefined;
    const empty = raw === undefined || raw.length === 0;
    let body: unknown;
    if (!(operation.bodyOptional && empty && request.headers["content-type"] === undefined)) {
      checkContentType(request.method, request.headers["content-type"]);
      body = operation.bodyOptional && empty ? undefined : decodeJsonBody(request.method, raw);
    }

    // Projections answer once they applied the organization's catalog writes up to
    // catalog_seq: first read every announcement sent before this request.
    if (operation.service === "reporting" || operation.service === "tracking") await deps.watermarks.settled?.().catch(() => undefined);
    let result: RawRpcReply;
    if (operation.service === "gateway") {
      const me = await orgsMe(principal);
      result = { status: me.status, headers: me.headers, payload: Buffer.from(JSON.stringify(me.body)) };
    } else {
      result = await callRpcRaw(deps.nc, rpcSubject(operation.service, operation.operation), envelopeOf(body), {
        timeoutMs: deps.rpcTimeoutMs,
        traceparent: formatTraceparent(traceOf(request.raw)),
      });
    }
    return render(request, reply, result);
  }

  function render(request: FastifyRequest, reply: FastifyReply, result: RawRpcReply) {
    for (const [name, value] of Object.entries(result.headers)) reply.header(name, value);
    reply.code(result.status);
    const { payload } = result;
    if (payload === undefined || result.status === 204) return reply.send();
    // Success bodies go out as the service rendered them, bytes untouched.
    const bytes =
      result.status >= 400
        ? Buffer.from(JSON.stringify(fixRequestId(JSON.parse(Buffer.from(payload).toString("utf8")), request.id)))
        : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
    return reply.header("content-type", "application/json").send(bytes);
  }

  const bulk = createBulkUploads(deps.nc, deps.rpcTimeoutMs);

  async function orgsMe(principal: Principal): Promise<RpcReply> {
    const org = await deps.identity.findOrganization(principal.org_id!);
    if (!org) throw notFound("Organization not found");
    return { status: 200, headers: {}, body: { data: { id: org.id, name: org.name, created_at: toWireTimestamp(org.createdAt) } } };
  }

  return app;
}

/**
 * Fastify's own errors (body limit, unparsable Content-Type, bad lengths) as
 * the spec's error types; anything else unknown stays an internal error.
 */
function fromFrameworkError(err: unknown, method: string): unknown {
  if (err instanceof AppError || !(err instanceof Error)) return err;
  const { code, statusCode } = err as { code?: string; statusCode?: number };
  if (code === "FST_ERR_CTP_BODY_TOO_LARGE" || statusCode === 413) {
    return new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
  }
  if (code === "FST_ERR_CTP_INVALID_MEDIA_TYPE" || statusCode === 415) return unsupportedMediaType(method);
  if (code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") return badRequest("Content-Length does not match the body");
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) return badRequest(err.message);
  return err;
}

/** `Accept: text/csv` (the CSV export of the asset list), unless JSON is asked for too. */
function wantsCsv(accept: string | undefined): boolean {
  return typeof accept === "string" && /(^|,)\s*text\/csv\b/i.test(accept) && !/application\/json/i.test(accept);
}

/** The request path (the envelope's `instance`); an absolute-form target (RFC 9112 3.2.2) loses its scheme and host. */
function pathOf(request: FastifyRequest): string {
  const index = request.url.indexOf("?");
  const target = index === -1 ? request.url : request.url.slice(0, index);
  return target.startsWith("/") ? target : target.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/, "") || "/";
}

/** Every query key with all its values; repeats are kept, commas are not split. */
function queryOf(request: FastifyRequest): Record<string, string[]> {
  const index = request.url.indexOf("?");
  return index === -1 ? {} : parseQueryString(request.url.slice(index + 1));
}

/** A service's error envelope carries the gateway's request id. */
function fixRequestId(body: unknown, requestId: string): unknown {
  if (body && typeof body === "object" && "error" in body) {
    const error = (body as { error: Record<string, unknown> }).error;
    if (error && typeof error === "object") error.request_id = requestId;
  }
  return body;
}

export type Gateway = Awaited<ReturnType<typeof buildGateway>>;
