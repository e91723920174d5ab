/**
 * The handheld page and its API (EXTENSIONS.md sections 1 and 2), outside
 * the public /api/v1:
 * - GET /handheld/ and its two files, same origin, strict CSP;
 * - POST /handheld/api/login, /logout; GET /lookup; POST /scans;
 *   GET /scans/<event_id>.
 * A session authenticates by the `wa_session` cookie (writes then also need
 * `X-Whereabouts-CSRF`) or by `Authorization: Bearer` (a session token or an
 * API key). Every error is the spec's envelope; every response carries the
 * security headers.
 */
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import { z } from "zod";
import { headers as natsHeaders } from "@nats-io/transport-node";
import type { JetStreamClient } from "@nats-io/jetstream";
import {
  AppError,
  callRpc,
  encodeJson,
  fieldError,
  forbidden,
  notFound,
  parseBody,
  repoRoot,
  requireOrg,
  rpcSubject,
  scanSubject,
  ScanEvent,
  toWireTimestamp,
  unauthorized,
  ValidationError,
  type Principal,
  type RpcRequest,
} from "@whereabouts/shared";
import type { AuthenticatedKey, AuthService } from "../identity/auth-service.ts";
import { decoyPasswordHash, generateSession, hashSecret, normalizeEmail, verifyPassword } from "../identity/credentials.ts";
import type { IdentityStore } from "../identity/identity-store.ts";
import { hashesEqual } from "../identity/api-key.ts";
import { checkContentType, decodeJsonBody } from "../http/request-decoding.ts";
import type { GatewayRouteConfig } from "../plugins/app-plugin.ts";

export const SESSION_COOKIE = "wa_session";
export const CSRF_HEADER = "x-whereabouts-csrf";
/** Failed sign-ins per email within LOGIN_WINDOW_MS before 429. */
export const LOGIN_FAILURE_LIMIT = 10;
export const LOGIN_WINDOW_MS = 15 * 60_000;

export interface HandheldOptions {
  sessionTtlS: number;
  cookieSecure: boolean;
}

export interface HandheldDeps {
  auth: AuthService;
  identity: Pick<IdentityStore, "findUserByEmail" | "createSession" | "revokeSession" | "countLoginFailures" | "recordLoginFailure">;
  nc: Parameters<typeof callRpc>[0];
  js: JetStreamClient;
  rpcTimeoutMs: number;
  options: HandheldOptions;
  /** The gateway's rate limit, per user (or per address for sign-in). */
  limit: (request: FastifyRequest, reply: FastifyReply, bucket: string, max?: number) => Promise<void>;
  now?: () => Date;
}

/** Same origin only; no inline script or style; never framed. */
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store",
};

/** The page's files: next to the compiled gateway (dist/handheld), or the sources. */
function pageDir(): string {
  const compiled = fileURLToPath(new URL("./handheld/", import.meta.url));
  return existsSync(path.join(compiled, "index.html")) ? compiled : path.join(repoRoot, "services/gateway/src/handheld/page");
}
const PAGE_FILES: Record<string, { file: string; type: string }> = {
  "/handheld/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/handheld/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/handheld/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
};

const Login = z.object({ email: z.string().max(320), password: z.string().max(1024) }).strict();

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const index = part.indexOf("=");
    if (index > 0 && part.slice(0, index).trim() === name) return part.slice(index + 1).trim();
  }
  return undefined;
}

/** Whatever registers routes (the gateway's Fastify instance, with its own logger type). */
interface RouteRegistry {
  route(options: RouteOptions): unknown;
}

/** The handheld routes as a plugin: the gateway's rate limit (plugins/rate-limit.ts) counts its requests. */
export const handheldPlugin: FastifyPluginAsync<Omit<HandheldDeps, "limit">> = async (app, deps) => {
  registerHandheld(app, { ...deps, limit: (request, reply, bucket, max) => app.rateLimit(request, reply, bucket, max) });
};

export function registerHandheld(app: RouteRegistry, deps: HandheldDeps): void {
  const now = deps.now ?? (() => new Date());
  const dir = pageDir();
  const files = new Map<string, Buffer>();

  const secure = (reply: FastifyReply) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
  };
  const cookie = (value: string, maxAgeS: number) =>
    `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${deps.options.cookieSecure ? "; Secure" : ""}`;
  const json = (reply: FastifyReply, status: number, body: unknown) =>
    reply.code(status).header("content-type", "application/json").send(Buffer.from(JSON.stringify(body)));
  const allow = (request: FastifyRequest, reply: FastifyReply, methods: string[]) => {
    const method = request.method === "HEAD" && methods.includes("GET") ? "GET" : request.method;
    if (methods.includes(method)) return;
    reply.header("allow", methods.join(", "));
    throw new AppError("method_not_allowed", `Allowed methods: ${methods.join(", ")}`);
  };

  /** The caller: the page's cookie (CSRF header on writes) or a Bearer token; then the rate limit. */
  async function authenticate(request: FastifyRequest, reply: FastifyReply, write: boolean): Promise<AuthenticatedKey> {
    const token = cookieValue(request.headers.cookie, SESSION_COOKIE);
    let who: AuthenticatedKey;
    try {
      if (request.headers.authorization !== undefined || token === undefined) {
        who = await deps.auth.authenticate(request.headers.authorization);
      } else {
        who = await deps.auth.authenticateSession(token);
        // A cross-site form can send the cookie but cannot set this header.
        const csrf = request.headers[CSRF_HEADER];
        if (write && (typeof csrf !== "string" || !hashesEqual(hashSecret(csrf), who.session!.csrfHash))) {
          throw forbidden(`Cookie-authenticated writes need the ${CSRF_HEADER} header the login returned`);
        }
      }
    } catch (err) {
      await deps.limit(request, reply, `ip:${request.ip}`);
      if (err instanceof AppError && err.type === "unauthorized") reply.header("www-authenticate", "Bearer");
      throw err;
    }
    await deps.limit(request, reply, who.bucket, who.rateLimit ?? undefined);
    requireOrg(who.principal);
    return who;
  }

  const envelope = (request: FastifyRequest, principal: Principal, route: string, fields: Partial<RpcRequest>): RpcRequest => ({
    request_id: request.id,
    principal,
    method: "GET",
    route,
    path: request.url.split("?")[0]!,
    params: {},
    query: {},
    ...fields,
  });
  const rpc = async (service: "catalog" | "tracking", operation: string, request: RpcRequest) => {
    const reply = await callRpc(deps.nc, rpcSubject(service, operation), request, { timeoutMs: deps.rpcTimeoutMs });
    if (reply.status >= 400) {
      const error = (reply.body as { error?: { type?: string; detail?: string } } | undefined)?.error;
      throw new AppError((error?.type ?? "internal_error") as never, error?.detail ?? "The service refused the request");
    }
    return reply.body as { data: unknown };
  };

  /**
   * A handheld route: every method reaches it, so a wrong one gets the envelope's 405
   * (with Allow) rather than Fastify's 404; the security headers go on every answer.
   */
  const route = (url: string, allowed: string[], handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>) =>
    app.route({
      method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
      url,
      config: { open: true } satisfies GatewayRouteConfig,
      handler: async (request, reply) => {
        secure(reply);
        allow(request, reply, allowed);
        return handler(request, reply);
      },
    });

  route("/handheld", ["GET"], async (request, reply) => {
    return reply.code(308).header("location", "/handheld/").send();
  });
  for (const [url, { file, type }] of Object.entries(PAGE_FILES)) {
    route(url, ["GET"], async (request, reply) => {
      let body = files.get(file);
      if (!body) files.set(file, (body = await readFile(path.join(dir, file))));
      return reply.header("content-type", type).send(body);
    });
  }

  route("/handheld/api/login", ["POST"], async (request, reply) => {
    await deps.limit(request, reply, `ip:${request.ip}`);
    checkContentType(request.method, request.headers["content-type"]);
    const { email: rawEmail, password } = parseBody(Login, decodeJsonBody(request.method, request.body as Buffer | undefined));
    const email = normalizeEmail(rawEmail);
    const at = now();
    const failures = await deps.identity.countLoginFailures(email, new Date(at.getTime() - LOGIN_WINDOW_MS));
    if (failures >= LOGIN_FAILURE_LIMIT) {
      reply.header("retry-after", String(Math.ceil(LOGIN_WINDOW_MS / 1000)));
      throw new AppError("rate_limited", "Too many failed sign-ins for this email; try again later");
    }
    const user = await deps.identity.findUserByEmail(email);
    // The same work and the same answer whether the email or the password is wrong.
    const valid = await verifyPassword(password, user?.passwordHash ?? (await decoyPasswordHash()));
    if (!user || !valid || user.disabledAt) {
      await deps.identity.recordLoginFailure(email, at);
      throw unauthorized("Wrong email or password");
    }
    const generated = generateSession();
    const expiresAt = new Date(at.getTime() + deps.options.sessionTtlS * 1000);
    await deps.identity.createSession({ userId: user.id, hash: generated.hash, csrfHash: generated.csrfHash, expiresAt });
    reply.header("set-cookie", cookie(generated.token, deps.options.sessionTtlS));
    return json(reply, 200, {
      data: {
        user: { id: user.id, email: user.email, org_id: user.orgId, scopes: user.scopes },
        csrf_token: generated.csrfToken,
        expires_at: toWireTimestamp(expiresAt),
      },
    });
  });

  route("/handheld/api/logout", ["POST"], async (request, reply) => {
    const who = await authenticate(request, reply, true);
    if (!who.session) throw forbidden("Only a session can log out");
    await deps.identity.revokeSession(who.session.id, now());
    const token = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (token) deps.auth.forgetSession(token);
    const bearer = request.headers.authorization?.trim().split(/\s+/)[1];
    if (bearer) deps.auth.forgetSession(bearer);
    reply.header("set-cookie", cookie("", 0));
    return reply.code(204).send();
  });

  route("/handheld/api/lookup", ["GET"], async (request, reply) => {
    const who = await authenticate(request, reply, false);
    const query = request.query as Record<string, string | string[]>;
    const unknown = Object.keys(query).filter((k) => k !== "value");
    if (unknown.length) throw new AppError("bad_request", `Unknown query parameter: ${unknown[0]}`);
    const values = ([] as string[]).concat(query.value ?? []);
    if (values.length !== 1 || values[0] === "") throw new AppError("bad_request", "value is required, once");
    const body = await rpc("catalog", "handheld.lookup", envelope(request, who.principal, "/handheld/api/lookup", { query: { value: values } }));
    return json(reply, 200, body);
  });

  route("/handheld/api/scans", ["POST"], async (request, reply) => {
    const who = await authenticate(request, reply, true);
    if (!who.principal.scopes.includes("scans:write")) throw forbidden("This operation requires the scans:write scope");
    checkContentType(request.method, request.headers["content-type"]);
    const scan = parseBody(ScanEvent, decodeJsonBody(request.method, request.body as Buffer | undefined));
    // The page asks for the outcome by event_id: a submission without one could never be followed.
    if (!scan.event_id) throw new ValidationError([fieldError("event_id", "required", "event_id is required")]);
    // A handheld has no scan point (its source is the user): it always names the location.
    if (!scan.location) throw new ValidationError([fieldError("location", "required", "location is required")]);
    const source = `handheld-${who.principal.user_id ?? `key${who.principal.key_id}`}`;
    const h = natsHeaders();
    // JetStream de-duplicates a retry within its window; tracking, by event_id, forever.
    h.set("Nats-Msg-Id", `handheld:${who.principal.org_id}:${scan.event_id}`);
    try {
      await deps.js.publish(scanSubject(who.principal.org_id!, source), encodeJson(scan), { headers: h, timeout: deps.rpcTimeoutMs });
    } catch (err) {
      request.log.error({ err }, "handheld scan not stored");
      throw new AppError("service_unavailable", "The scan could not be stored; retry with the same event_id");
    }
    return json(reply, 202, { data: { event_id: scan.event_id } });
  });

  route("/handheld/api/scans/:event_id", ["GET"], async (request, reply) => {
    const who = await authenticate(request, reply, false);
    const eventId = (request.params as { event_id: string }).event_id;
    if (!eventId || eventId.length > 255) throw notFound("Scan not found");
    const status = (await rpc("tracking", "scan.status", envelope(request, who.principal, "/handheld/api/scans/:event_id", { params: { event_id: eventId } })))
      .data as { status: string; location_id: number | null; asset_ids: number[]; unresolved_tags: unknown[]; reason: string | null };
    let assets: Array<{ id: number; external_key: string; location_id: number | null }> = [];
    if (status.asset_ids.length) {
      const found = (await rpc("catalog", "handheld.assets", envelope(request, who.principal, "/handheld/api/scans/:event_id", { query: { id: status.asset_ids.map(String) } })))
        .data as Array<{ id: number; external_key: string }>;
      assets = found.map((a) => ({ id: a.id, external_key: a.external_key, location_id: status.location_id }));
    }
    return json(reply, 200, { data: { status: status.status, assets, unresolved_tags: status.unresolved_tags, reason: status.reason } });
  });
}
