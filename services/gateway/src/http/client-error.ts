/**
 * Requests Node's HTTP parser refuses before Fastify sees them (a space or
 * a percent-encoded slash in the request line, a head over 16 KB, broken
 * framing, a head that never completes): the spec's error envelope written
 * straight to the socket, with `Connection: close` (the parser cannot find
 * where the next request starts), no body on HEAD, and the request's
 * X-Request-ID when it could be read, else a fresh ULID.
 */
import type { Duplex } from "node:stream";
import { STATUS_CODES, type IncomingMessage } from "node:http";
import { AppError, errorBody, newRequestId, notFound, OPERATION_ROUTES, toErrorEnvelope, type ErrorType } from "@whereabouts/shared";

interface ParserError extends Error {
  code?: string;
  rawPacket?: Buffer;
  bytesParsed?: number;
}

/** Sockets already answered: the parser may report more errors on them. */
const answered = new WeakSet<Duplex>();

/** A request id echoed from a refused request stays small enough for any client to read. */
const MAX_ECHOED_ID = 8192;

const REQUEST_LINE = /(?:^|\n)([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([^\s]*)(?: HTTP\/\d\.\d)?\r?\n/g;

/** The method, target and X-Request-ID of the request being parsed, as far as they can be read. */
export function readRefusedRequest(err: ParserError): { method?: string; target?: string; requestId?: string } {
  const raw = err.rawPacket?.toString("latin1") ?? "";
  if (!raw) return {};
  const limit = Math.min(raw.length, (err.bytesParsed ?? raw.length) + 1);
  let start = -1;
  let method: string | undefined;
  let target: string | undefined;
  for (const m of raw.matchAll(REQUEST_LINE)) {
    if (m.index >= limit) break;
    start = m.index;
    method = m[1];
    target = m[2];
  }
  // A request line we could not match (a space inside the target, say): its first word.
  if (start === -1) {
    const first = /^([A-Z]+) (\S*)/.exec(raw);
    if (first) {
      start = 0;
      method = first[1];
      target = first[2];
    }
  }
  if (start === -1) return {};
  const head = raw.slice(start);
  const id = /\r?\nx-request-id:[ \t]*([^\r\n]*?)[ \t]*\r?\n/i.exec(head)?.[1];
  const requestId = id !== undefined && id !== "" && id.length <= MAX_ECHOED_ID && /^[\t\x20-\x7e]*$/.test(id) ? id : undefined;
  return { method, target, requestId };
}

function classify(code: string | undefined): { type: ErrorType; detail: string } {
  if (code === "HPE_HEADER_OVERFLOW") {
    return { type: "request_header_fields_too_large", detail: "The request line and headers exceed 16 KB" };
  }
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return { type: "request_timeout", detail: "The request did not arrive in time" };
  }
  return { type: "bad_request", detail: `The request is not valid HTTP/1.1 (${code ?? "parse error"})` };
}

/** Writes an envelope as a whole response and closes the connection after it. */
function writeAndClose(
  socket: Duplex,
  envelope: ReturnType<typeof errorBody>,
  requestId: string,
  options: { head?: boolean; headers?: Record<string, string> } = {},
): void {
  const body = Buffer.from(JSON.stringify(envelope));
  const status = envelope.error.status;
  const extra = Object.entries(options.headers ?? {})
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  const head =
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
    `content-type: application/json\r\n` +
    `content-length: ${body.length}\r\n` +
    `x-request-id: ${requestId}\r\n` +
    extra +
    `date: ${new Date().toUTCString()}\r\n` +
    `connection: close\r\n\r\n`;
  if (socket.writable) socket.end(options.head ? head : Buffer.concat([Buffer.from(head, "latin1"), body]));
  // Whatever else the client sends is not read; do not hold the socket open for it.
  setTimeout(() => socket.destroy(), 2000).unref();
}

const ROUTE_PATTERNS = OPERATION_ROUTES.map((route) => ({ route, pattern: new RegExp(`^${route.path.replace(/:\w+/g, "[^/]+")}$`) }));

/**
 * CONNECT, which Node hands over as a tunnel rather than a request: 405 with
 * Allow on an API path, 404 on another path, 400 when the target is not a
 * path at all (this is no proxy). No body was read: the connection closes.
 */
export function answerConnect(req: IncomingMessage, socket: Duplex): void {
  const sent = req.headers["x-request-id"];
  const requestId = typeof sent === "string" && sent !== "" ? sent : newRequestId();
  const target = req.url ?? "";
  const path = target.split("?")[0]!;
  let err: AppError;
  const headers: Record<string, string> = {};
  if (!path.startsWith("/")) err = new AppError("bad_request", "CONNECT is not supported: the request target must be a path");
  else {
    const match = ROUTE_PATTERNS.find((r) => r.pattern.test(path));
    if (match) {
      const allow = match.route.allow;
      headers.allow = allow;
      err = new AppError("method_not_allowed", `Allowed methods: ${allow}`);
    } else err = notFound(`No resource at ${path}`);
  }
  const envelope = toErrorEnvelope(err, { instance: /^[\x21-\x7e]*$/.test(path) ? path : "", request_id: requestId });
  writeAndClose(socket, envelope, requestId, { headers });
}

/** Fastify's `clientErrorHandler` (Node's parser errors carry `rawPacket` and `bytesParsed`). */
export function answerClientError(error: Error, socket: Duplex): void {
  const err = error as ParserError;
  if (err.code === "ECONNRESET" || socket.destroyed || answered.has(socket)) return;
  answered.add(socket);
  const { method, target, requestId } = readRefusedRequest(err);
  const { type, detail } = classify(err.code);
  const id = requestId ?? newRequestId();
  const query = target?.indexOf("?") ?? -1;
  const instance = target === undefined ? "" : query === -1 ? target : target.slice(0, query);
  const envelope = errorBody(type, detail, { instance: /^[\x21-\x7e]*$/.test(instance) ? instance : "", request_id: id });
  writeAndClose(socket, envelope, id, { head: method === "HEAD" });
}
