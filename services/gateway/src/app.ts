/**
 * The HTTP edge. Every request goes through the same steps, in this order:
 * request id, authentication (401), rate limit (429), route and method
 * (404/405), scope (403), organization context (403/422), path ids (400);
 * then the body: size (413), media type (415), JSON (400); then forwarding
 * as an RPC envelope to `<service>.<operation>`, whose reply is rendered as is.
 */
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import {
  AppError,
  callRpc,
  forbidden,
  natsConnected,
  newRequestId,
  notFound,
  parsePathId,
  pingService,
  rpcSubject,
  SERVICES,
  toErrorEnvelope,
  toWireTimestamp,
  ValidationError,
  type FieldError,
  type Logger,
  type NatsConnection,
  type Principal,
  type RpcReply,
  type RpcRequest,
} from "@whereabouts/shared";
import { allowedMethods, ROUTES, type RouteMethod, type RouteOperation, type RouteSpec } from "./routes/route-table.ts";
import type { AuthService } from "./identity/auth-service.ts";
import type { IdentityStore } from "./identity/identity-store.ts";
import type { RateLimiter } from "./plugins/rate-limiter.ts";
import { BODY_LIMIT_BYTES, checkContentType, decodeJsonBody } from "./http/http-rules.ts";

export interface GatewayDeps {
  logger: Logger;
  nc: NatsConnection;
  auth: AuthService;
  identity: Pick<IdentityStore, "findOrganization">;
  rateLimiter: RateLimiter;
  rateLimit: { max: number; windowMs: number };
  rpcTimeoutMs: number;
  readyTimeoutMs: number;
}

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    operation?: RouteOperation;
  }
}

const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

export async function buildGateway(deps: GatewayDeps) {
  const app = Fastify({
    loggerInstance: deps.logger,
    requestIdLogLabel: "request_id",
    bodyLimit: BODY_LIMIT_BYTES,
    exposeHeadRoutes: false,
    return503OnClosing: true,
    requestIdHeader: false,
    genReqId: (req) => {
      const sent = req.headers["x-request-id"];
      return typeof sent === "string" && sent !== "" ? sent : newRequestId();
    },
  });

  // Bodies are read raw and decoded by the handler, after the checks above.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });

  const sendError = (request: FastifyRequest, reply: FastifyReply, err: unknown) => {
    const envelope = toErrorEnvelope(err, { instance: pathOf(request), request_id: request.id });
    if (envelope.error.status >= 500 && !(err instanceof AppError)) request.log.error({ err, request_id: request.id }, "request failed");
    if (err instanceof AppError) for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    return reply.code(envelope.error.status).header("content-type", "application/json").send(JSON.stringify(envelope));
  };

  app.setErrorHandler((err, request, reply) => {
    const code = (err as { code?: string }).code;
    if (code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      return sendError(request, reply, new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`));
    }
    if (code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") {
      return sendError(request, reply, new AppError("bad_request", "Content-Length does not match the body"));
    }
    return sendError(request, reply, err);
  });

  /* Authentication and rate limit: every /api/v1 request, before routing. */
  const guard = async (request: FastifyRequest, reply: FastifyReply) => {
    let bucket = `ip:${request.ip}`;
    let limit = deps.rateLimit.max;
    let authError: unknown;
    try {
      const authenticated = await deps.auth.authenticate(request.headers.authorization);
      request.principal = authenticated.principal;
      bucket = `key:${authenticated.principal.key_id}`;
      limit = authenticated.rateLimit ?? deps.rateLimit.max;
    } catch (err) {
      authError = err;
    }
    const rl = await deps.rateLimiter.hit(bucket, limit);
    const resetSeconds = Math.max(1, Math.ceil(rl.resetMs / 1000));
    reply.header("ratelimit-limit", String(rl.limit));
    reply.header("ratelimit-remaining", String(rl.remaining));
    reply.header("ratelimit-reset", String(resetSeconds));
    if (authError) throw authError;
    if (!rl.allowed) {
      reply.header("retry-after", String(resetSeconds));
      throw new AppError("rate_limited", `Rate limit of ${rl.limit} requests per window exceeded`);
    }
  };

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (request, reply) => {
    const nats = natsConnected(deps.nc);
    const services = await Promise.all(SERVICES.map((s) => pingService(deps.nc, s, deps.readyTimeoutMs)));
    const checks = { nats, ...Object.fromEntries(SERVICES.map((s, i) => [s, services[i]])) };
    if (nats && services.every(Boolean)) return { status: "ready", checks };
    const down = Object.entries(checks).filter(([, ok]) => !ok).map(([name]) => name);
    reply.header("retry-after", "1");
    return sendError(request, reply, new AppError("service_unavailable", `Not ready: ${down.join(", ")}`));
  });

  for (const route of ROUTES) {
    app.route({
      method: [...ALL_METHODS],
      url: route.path,
      onRequest: async (request, reply) => {
        await guard(request, reply);
        request.operation = resolveOperation(route, request, reply);
      },
      handler: async (request, reply) => forward(route, request, reply),
    });
  }

  app.setNotFoundHandler(
    { preHandler: guard },
    async (request) => {
      throw notFound(`No resource at ${pathOf(request)}`);
    },
  );

  function resolveOperation(route: RouteSpec, request: FastifyRequest, reply: FastifyReply): RouteOperation {
    const method = (request.method === "HEAD" ? "GET" : request.method) as RouteMethod;
    const operation = route.methods[method];
    const allow = allowedMethods(route).join(", ");
    if (!operation) {
      reply.header("allow", allow);
      throw new AppError("method_not_allowed", `Allowed methods: ${allow}`);
    }
    const principal = request.principal!;
    if (operation.scope && !principal.scopes.includes(operation.scope)) {
      throw forbidden(`This operation requires the ${operation.scope} scope`);
    }
    if (principal.org_id === null) {
      if (operation.operation === "orgs.me") {
        throw new AppError("missing_org_context", "The API key has no organization context");
      }
      throw forbidden("The API key has no organization context");
    }
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
    checkContentType(request.method, request.headers["content-type"]);
    const body = decodeJsonBody(request.method, request.body as Buffer | undefined);

    let result: RpcReply;
    if (operation.service === "gateway") {
      result = await orgsMe(principal);
    } else {
      const envelope: RpcRequest = {
        request_id: request.id,
        principal,
        method: request.method === "HEAD" ? "GET" : request.method,
        route: route.path,
        path: pathOf(request),
        params: request.params as Record<string, string>,
        query: queryOf(request),
        body,
      };
      const traceparent = request.headers.traceparent;
      result = await callRpc(deps.nc, rpcSubject(operation.service, operation.operation), envelope, {
        timeoutMs: deps.rpcTimeoutMs,
        ...(typeof traceparent === "string" ? { traceparent } : {}),
      });
    }
    for (const [name, value] of Object.entries(result.headers)) reply.header(name, value);
    reply.code(result.status);
    if (result.body === undefined || result.status === 204) return reply.send();
    const payload = JSON.stringify(fixRequestId(result.body, request.id));
    reply.header("content-type", "application/json");
    if (request.method === "HEAD") {
      reply.header("content-length", String(Buffer.byteLength(payload)));
      return reply.send();
    }
    return reply.send(payload);
  }

  async function orgsMe(principal: Principal): Promise<RpcReply> {
    const org = await deps.identity.findOrganization(principal.org_id!);
    if (!org) throw notFound("Organization not found");
    return { status: 200, headers: {}, body: { data: { id: org.id, name: org.name, created_at: toWireTimestamp(org.createdAt) } } };
  }

  return app;
}

function pathOf(request: FastifyRequest): string {
  const index = request.url.indexOf("?");
  return index === -1 ? request.url : request.url.slice(0, index);
}

/** Every query key with all its values; repeats are kept, commas are not split. */
function queryOf(request: FastifyRequest): Record<string, string[]> {
  const index = request.url.indexOf("?");
  const out: Record<string, string[]> = {};
  if (index === -1) return out;
  for (const [key, value] of new URLSearchParams(request.url.slice(index + 1))) {
    (out[key] ??= []).push(value);
  }
  return out;
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
