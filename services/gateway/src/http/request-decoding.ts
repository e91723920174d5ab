/** The generic HTTP rules of the spec, framework-free: content types, JSON bodies, the query string. */
import {
  AppError,
  badRequest,
  BODY_LIMIT_BYTES,
  BODY_MEDIA_TYPES,
  DETAIL_NOT_JSON,
  DETAIL_NULL_PATCH,
  jsonProblemsError,
  scanJsonText,
} from "@whereabouts/shared";

/** DECISIONS.md: 1 MiB; larger bodies get 413 payload_too_large. */
export { BODY_LIMIT_BYTES };

const DETAILS: Record<string, string> = {
  POST: "Content-Type must be application/json",
  PATCH: "Content-Type must be application/merge-patch+json on PATCH operations",
};

export function unsupportedMediaType(method: string): AppError {
  return new AppError("unsupported_media_type", DETAILS[method] ?? "Content-Type is not a valid media type");
}

/** Accepts the method's media type, optionally with `charset=utf-8` only. */
export function checkContentType(method: string, header: string | undefined): void {
  const expected = Object.hasOwn(BODY_MEDIA_TYPES, method) ? BODY_MEDIA_TYPES[method] : undefined;
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

/**
 * Decodes the raw body as JSON (UTF-8, RFC 8259) with the spec's bad_request
 * details. Bytes that are not UTF-8 are refused, never replaced. Before
 * JSON.parse, one iterative pass over the text refuses nesting deeper than
 * any field allows (nothing recursive, here or in the service, ever sees
 * it); after it, lone surrogates and numbers beyond the double range (which
 * JSON.parse would turn into Infinity, and JSON into null) are refused too.
 */
export function decodeJsonBody(method: string, raw: Buffer | undefined): unknown {
  if (!Object.hasOwn(BODY_MEDIA_TYPES, method)) return undefined;
  let text: string;
  try {
    text = raw ? utf8.decode(raw) : "";
  } catch {
    throw badRequest(DETAIL_NOT_JSON);
  }
  const problems = scanJsonText(text);
  const tooDeep = jsonProblemsError(problems.filter((p) => p.kind === "depth"));
  if (tooDeep) throw tooDeep;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badRequest(DETAIL_NOT_JSON);
  }
  if (body === null && method === "PATCH") throw badRequest(DETAIL_NULL_PATCH);
  // Any other top level is refused by the service as the wrong type, whatever it holds.
  const object = body !== null && typeof body === "object" && !Array.isArray(body);
  const problem = object ? jsonProblemsError(problems) : undefined;
  if (problem) throw problem;
  return body;
}

/**
 * The query string as keys with all their values, in order (repeats kept,
 * commas not split), decoded as `application/x-www-form-urlencoded` does
 * (`+` is a space) except that percent-encoded bytes must be UTF-8: they are
 * refused, never replaced with U+FFFD. The result holds every key as an own
 * property, `__proto__` included.
 */
export function parseQueryString(search: string): Record<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of search.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const key = decodeQueryComponent(eq === -1 ? part : part.slice(0, eq));
    const value = decodeQueryComponent(eq === -1 ? "" : part.slice(eq + 1));
    const values = out.get(key);
    if (values) values.push(value);
    else out.set(key, [value]);
  }
  return Object.fromEntries(out);
}

const HEX = /^[0-9A-Fa-f]{2}$/;

function decodeQueryComponent(raw: string): string {
  const text = raw.replaceAll("+", " ");
  if (!text.includes("%")) return text;
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x25 && HEX.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (c <= 0xff) {
      // Node hands the request line over as latin1: one character per byte sent.
      bytes.push(c);
    } else {
      const end = c >= 0xd800 && c <= 0xdbff ? i + 2 : i + 1;
      bytes.push(...Buffer.from(text.slice(i, end)));
      i = end - 1;
    }
  }
  try {
    return utf8.decode(Uint8Array.from(bytes));
  } catch {
    throw badRequest("The query string is not valid percent-encoded UTF-8");
  }
}
