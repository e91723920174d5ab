/**
 * The HTTP edge, composed from its plugins. Every request goes through the
 * same steps, in this order (the order they are registered):
 * request id and Host (http-rules), shutting down (503), authentication
 * (401) and rate limit (429); then the forward route: method (405), scope
 * (403), organization context (403/422), path ids (400), the body (413, 415,
 * 400), and the RPC on the operation's subject, whose reply is rendered as
 * is. The probes and the handheld page are open routes: no key, and the
 * handheld limits its own requests. Every request continues the caller's
 * W3C trace (or starts one): its log lines carry trace_id and the RPC
 * carries the `traceparent` header.
 */
import type { IncomingMessage } from "node:http";
import Fastify, { LogController } from "fastify";
import { jetstream } from "@nats-io/jetstream";
import { badRequest, createMetrics, newRequestId, type CatalogWatermarks, type Logger, type Metrics, type NatsConnection } from "@whereabouts/shared";
import type { AuthService } from "./identity/auth-service.ts";
import type { IdentityStore } from "./identity/identity-store.ts";
import type { RateLimiter } from "./rate-limit/rate-limiter.ts";
import { answerClientError } from "./http/client-error.ts";
import { BODY_LIMIT_BYTES } from "./http/request-decoding.ts";
import { traceOf } from "./http/request-trace.ts";
import { handheldPlugin, type HandheldOptions } from "./handheld/handheld-routes.ts";
import { httpRulesPlugin } from "./plugins/http-rules.ts";
import { shutdownPlugin } from "./plugins/shutdown.ts";
import { metricsPlugin } from "./plugins/metrics.ts";
import { errorHandlerPlugin } from "./plugins/error-handler.ts";
import { authPlugin } from "./plugins/auth.ts";
import { rateLimitPlugin } from "./plugins/rate-limit.ts";
import { probesPlugin } from "./plugins/probes.ts";
import { forwardRoute } from "./routes/forward-route.ts";
import { orgsMe } from "./routes/orgs-me.ts";

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

export async function buildGateway(deps: GatewayDeps) {
  const metrics = deps.metrics ?? createMetrics({ service: "gateway" });
  const app = Fastify({
    loggerInstance: deps.logger,
    // Every request's log lines carry its trace id.
    childLoggerFactory: (logger, bindings, opts, raw) => logger.child({ ...bindings, trace_id: traceOf(raw as IncomingMessage).traceId }, opts),
    logController: new LogController({
      requestIdLogLabel: "request_id",
      disableRequestLogging: (request) => request.url === "/healthz" || request.url === "/readyz",
    }),
    bodyLimit: BODY_LIMIT_BYTES,
    // Requests the HTTP parser refuses get the envelope too (client-error.ts), and a
    // missing Host is answered by the http-rules plugin, not by Node's bare 400.
    clientErrorHandler: answerClientError,
    http: { requireHostHeader: false },
    exposeHeadRoutes: false,
    // Requests arriving while closing get the spec's envelope (plugins/shutdown.ts), not Fastify's.
    return503OnClosing: false,
    requestIdHeader: false,
    // Path ids longer than Fastify's default 100 characters are still ids: 400 too_large, not 414.
    routerOptions: { maxParamLength: 4096 },
    genReqId: (req) => {
      const sent = req.headers["x-request-id"];
      return typeof sent === "string" && sent !== "" ? sent : newRequestId();
    },
    // A path that is not valid percent-encoding never reaches a route, nor its hooks:
    // authenticated and counted all the same, then 400.
    frameworkErrors: (err, request, reply) => {
      reply.header("x-request-id", request.id);
      app
        .authenticate(request)
        .then(() => app.limitRequest(request, reply))
        .then(
          () => app.sendError(request, reply, badRequest(`The request path is not valid: ${err.message}`)),
          (guardErr: unknown) => app.sendError(request, reply, guardErr),
        );
    },
  });

  // The hooks run in this order.
  await app.register(httpRulesPlugin);
  await app.register(shutdownPlugin);
  await app.register(metricsPlugin, { metrics });
  await app.register(errorHandlerPlugin);
  await app.register(authPlugin, { auth: deps.auth });
  await app.register(rateLimitPlugin, { rateLimiter: deps.rateLimiter, max: deps.rateLimit.max, metrics });

  await app.register(probesPlugin, { nc: deps.nc, readyTimeoutMs: deps.readyTimeoutMs });
  await app.register(handheldPlugin, {
    auth: deps.auth,
    identity: deps.identity,
    nc: deps.nc,
    js: jetstream(deps.nc),
    rpcTimeoutMs: deps.rpcTimeoutMs,
    options: { sessionTtlS: deps.handheld?.sessionTtlS ?? 43_200, cookieSecure: deps.handheld?.cookieSecure ?? false },
  });
  await app.register(forwardRoute, {
    nc: deps.nc,
    rpcTimeoutMs: deps.rpcTimeoutMs,
    watermarks: deps.watermarks,
    local: { "orgs.me": orgsMe(deps.identity) },
  });
  return app;
}

export type Gateway = Awaited<ReturnType<typeof buildGateway>>;
