/** The generic HTTP rules of the spec: content types and JSON bodies. */
import { AppError, badRequest, DETAIL_NOT_JSON, DETAIL_NULL_PATCH } from "@whereabouts/shared";

/** DECISIONS.md: 1 MiB; larger bodies get 413 payload_too_large. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

const MEDIA_TYPES: Record<string, string> = {
  POST: "application/json",
  PATCH: "application/merge-patch+json",
};
const DETAILS: Record<string, string> = {
  POST: "Content-Type must be application/json",
  PATCH: "Content-Type must be application/merge-patch+json on PATCH operations",
};

export function unsupportedMediaType(method: string): AppError {
  return new AppError("unsupported_media_type", DETAILS[method] ?? "Content-Type is not a valid media type");
}

/** Accepts the method's media type, optionally with `charset=utf-8` only. */
export function checkContentType(method: string, header: string | undefined): void {
  const expected = Object.hasOwn(MEDIA_TYPES, method) ? MEDIA_TYPES[method] : undefined;
  if (!expected) return;
  if (!header) throw unsupportedMediaType(method);
  const [type, ...params] = header.split(";").map((p) => p.trim());
  if (type?.toLowerCase() !== expected) throw unsupportedMediaType(method);
  for (const param of params) {
    if (param === "") continue;
    const eq = param.indexOf("=");
    const name = (eq === -1 ? param : param.slice(0, eq)).trim().toLowerCase();
    const value = eq === -1 ? "" : param.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1").toLowerCase();
    if (name !== "charset" || value !== "utf-8") throw unsupportedMediaType(method);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Decodes the raw body as JSON (UTF-8, RFC 8259) with the spec's bad_request details. */
export function decodeJsonBody(method: string, raw: Buffer | undefined): unknown {
  if (!Object.hasOwn(MEDIA_TYPES, method)) return undefined;
  let body: unknown;
  try {
    const text = raw ? utf8.decode(raw) : "";
    body = JSON.parse(text);
  } catch {
    throw badRequest(DETAIL_NOT_JSON);
  }
  if (body === null && method === "PATCH") throw badRequest(DETAIL_NULL_PATCH);
  return body;
}
