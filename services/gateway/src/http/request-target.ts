/** The request target as the pipeline reads it: its path and its query. */
import type { FastifyRequest } from "fastify";
import { parseQueryString } from "./request-decoding.ts";

/** The request path (the envelope's `instance`); an absolute-form target (RFC 9112 3.2.2) loses its scheme and host. */
export function pathOf(request: FastifyRequest): string {
  const index = request.url.indexOf("?");
  const target = index === -1 ? request.url : request.url.slice(0, index);
  return target.startsWith("/") ? target : target.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/, "") || "/";
}

/** Every query key with all its values; repeats are kept, commas are not split. */
export function queryOf(request: FastifyRequest): Record<string, string[]> {
  const index = request.url.indexOf("?");
  return index === -1 ? {} : parseQueryString(request.url.slice(index + 1));
}
