/**
 * The public API: one route per path of the operation catalog, every method
 * routed to it. For each request: its operation (405 with Allow otherwise),
 * scope (403), organization context, path ids (400); then the body rules
 * (415, 400) and forwarding as an RPC envelope on the operation's subject,
 * whose reply is rendered as is. The gateway's own operations (orgs/me) are
 * answered here; bulk upload and CSV export stream (bulk-upload.ts).
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import {
  AppError,
  callRpcRaw,
  forbidden,
  formatTraceparent,
  OPERATION_ROUTES,
  parsePathId,
  requireOrg,
  ValidationError,
  type CatalogWatermarks,
  type FieldError,
  type HttpMethod,
  type NatsConnection,
  type Operation,
  type OperationRoute,
  type Principal,
  type RawRpcReply,
  type RpcRequest,
} from "@whereabouts/shared";
import { createBulkUploads } from "../bulk/bulk-upload.ts";
import { checkContentType, decodeJsonBody } from "../http/request-decoding.ts";
import { traceOf } from "../http/request-trace.ts";
import { pathOf, queryOf } from "../http/request-target.ts";
import { ROUTE_METHODS } from "../plugins/http-rules.ts";

declare module "fastify" {
  interface FastifyRequest {
    operation?: Operation;
  }
}

/** An operation the gateway answers itself, for an authenticated principal with an organization. */
export type LocalOperation = (principal: Principal) => Promise<RawRpcReply>;

export interface ForwardRouteOptions {
  nc: NatsConnection;
  rpcTimeoutMs: number;
  /** Each organization's newest catalog write: reads carry it (read-your-writes). */
  watermarks: Pick<CatalogWatermarks, "seqFor"> & Partial<Pick<CatalogWatermarks, "settled">>;
  /** The catalog's operations of service "gateway", by name. */
  local: Readonly<Record<string, LocalOperation>>;
}

const MULTIPART = "multipart/form-data";
const CSV = "text/csv";

export const forwardRoute: FastifyPluginAsync<ForwardRouteOptions> = async (app, options) => {
  const { nc, rpcTimeoutMs, watermarks, local } = options;
  const bulk = createBulkUploads(nc, rpcTimeoutMs);

  for (const route of OPERATION_ROUTES) {
    for (const op of Object.values(route.methods)) {
      if (op.service === "gateway" && !local[op.name]) throw new Error(`The gateway does not answer ${op.name}`);
    }
    app.route({
      method: ROUTE_METHODS,
      url: route.path,
      onRequest: async (request, reply) => {
        request.operation = resolveOperation(route, request, reply);
      },
      handler: async (request, reply) => forward(request, reply),
    });
  }

  async function forward(request: FastifyRequest, reply: FastifyReply) {
    const operation = request.operation!;
    const principal = request.principal!;
    const envelopeOf = (body: unknown): RpcRequest => ({
      request_id: request.id,
      principal,
      method: request.method === "HEAD" ? "GET" : request.method,
      route: operation.path,
      path: pathOf(request),
      params: request.params as Record<string, string>,
      query: queryOf(request),
      body,
      catalog_seq: watermarks.seqFor(principal.org_id),
    });
    // Bulk upload: multipart, streamed to the object store (bulk-upload.ts), not a JSON body.
    if (operation.body?.media === MULTIPART) return render(request, reply, await bulk.upload(request.raw, envelopeOf(undefined)));
    if (operation.alternates?.[CSV] !== undefined && wantsCsv(request.headers.accept)) {
      const csv = await bulk.exportCsv(envelopeOf(undefined));
      reply.header("content-type", "text/csv; charset=utf-8").header("content-disposition", 'attachment; filename="assets.csv"');
      return reply.send(request.method === "HEAD" ? undefined : csv);
    }
    const raw = request.body as Buffer | undefined;
    const empty = raw === undefined || raw.length === 0;
    let body: unknown;
    // An operation without a body takes an empty one without Content-Type (its parameters are in the query).
    const bodyless = operation.body === undefined;
    if (!(bodyless && empty && request.headers["content-type"] === undefined)) {
      checkContentType(request.method, request.headers["content-type"]);
      body = bodyless && empty ? undefined : decodeJsonBody(request.method, raw);
    }

    // Projections answer once they applied the organization's catalog writes up to catalog_seq,
    // and the catalog's caches serve what is current at it: first read every announcement sent
    // before this request (a write through another gateway included).
    if (operation.watermarked) await watermarks.settled?.().catch(() => undefined);
    const result =
      operation.subject === null
        ? await local[operation.name]!(principal)
        : await callRpcRaw(nc, operation.subject, envelopeOf(body), {
            timeoutMs: rpcTimeoutMs,
            traceparent: formatTraceparent(traceOf(request.raw)),
          });
    return render(request, reply, result);
  }
};

function resolveOperation(route: OperationRoute, request: FastifyRequest, reply: FastifyReply): Operation {
  const method = (request.method === "HEAD" ? "GET" : request.method) as HttpMethod;
  const operation = Object.hasOwn(route.methods, method) ? route.methods[method] : undefined;
  if (!operation) {
    reply.header("allow", route.allow);
    throw new AppError("method_not_allowed", `Allowed methods: ${route.allow}`);
  }
  const principal = request.principal!;
  if (operation.scope && !principal.scopes.includes(operation.scope)) {
    throw forbidden(`This operation requires the ${operation.scope} scope`);
  }
  // The catalog lists missing_org_context among the errors of orgs/me and its settings (the spec's 422).
  requireOrg(principal, operation.errors.includes("missing_org_context") ? "orgs/me" : "other");
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

/** `Accept: text/csv` (the CSV export of the asset list), unless JSON is asked for too. */
function wantsCsv(accept: string | undefined): boolean {
  return typeof accept === "string" && /(^|,)\s*text\/csv\b/i.test(accept) && !/application\/json/i.test(accept);
}

/** A service's error envelope carries the gateway's request id. */
function fixRequestId(body: unknown, requestId: string): unknown {
  if (body && typeof body === "object" && "error" in body) {
    const error = (body as { error: Record<string, unknown> }).error;
    if (error && typeof error === "object") error.request_id = requestId;
  }
  return body;
}
