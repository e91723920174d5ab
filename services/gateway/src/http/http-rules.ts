/** The generic HTTP rules of the spec: content types and JSON bodies. */
import { AppError, badRequest, DETAIL_NOT_JSON, DETAIL_NULL_PATCH } from "@whereabouts/shared";

export const BODY_LIMIT_BYTES = 1024 * 1024;

const MEDIA_TYPES: Record<string, string> = {
  POST: "application/json",
  PATCH: "application/merge-patch+json",
};
const DETAILS: Record<string, string> = {
  POST: "Content-Type must be application/json",
  PATCH: "Content-Type must be application/merge-patch+json on PATCH operations",
};

/** Accepts the method's media type, optionally with `charset=utf-8` only. */
export function checkContentType(method: string, header: string | undefined): void {
  const expected = MEDIA_TYPES[method];
  if (!expected) return;
  const fail = () => new AppError("unsupported_media_type", DETAILS[method]!);
  if (!header) throw fail();
  const [type, ...params] = header.split(";").map((p) => p.trim());
  if (type?.toLowerCase() !== expected) throw fail();
  for (const param of params) {
    if (param === "") continue;
    const [name, value] = param.split("=").map((p) => p.trim().toLowerCase());
    if (name !== "charset" || value?.replace(/^"|"$/g, "") !== "utf-8") throw fail();
  }
}

/** Decodes the raw body as JSON with the spec's bad_request details. */
export function decodeJsonBody(method: string, raw: Buffer | undefined): unknown {
  if (!MEDIA_TYPES[method]) return undefined;
  const text = raw ? raw.toString("utf8") : "";
  if (text.trim() === "") throw badRequest(DETAIL_NOT_JSON);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badRequest(DETAIL_NOT_JSON);
  }
  if (body === null && method === "PATCH") throw badRequest(DETAIL_NULL_PATCH);
  return body;
}
