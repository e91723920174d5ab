/**
 * Property-based HTTP fuzzing of the gateway, driven by docs/openapi.json
 * (issue 10, item 7). Requests are derived from the document's paths,
 * parameters and request schemas, each part either valid or hostile: odd
 * paths and methods, odd headers and query keys, wrong types, lone
 * surrogates, numbers such as 1e400, deep nesting, huge strings within the
 * 1 MiB body limit, bytes that are not UTF-8, and malformed HTTP sent on a
 * raw socket. Every response is checked against the contract every client
 * relies on (`checkExchange`): no 5xx; the envelope on every non-2xx with
 * Content-Type exactly application/json and request_id equal to the
 * X-Request-ID header; no Access-Control-Allow-* header; HEAD without a
 * body; a kept-alive connection either still usable or closed with
 * `Connection: close` announced; every 2xx body valid against the document.
 *
 * Used by tests/http-fuzz.test.ts (a bounded run in `npm test`) and by
 * scripts/fuzz.ts (`npm run fuzz`, FUZZ_RUNS=100000).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import {
  BODY_LIMIT_BYTES,
  METADATA_MAX_BYTES,
  METADATA_MAX_DEPTH,
  OFFSET_MAX,
  Q_MAX_LENGTH,
  TAGS_PER_CREATE_MAX,
} from "@whereabouts/shared";
import { createOpenApiValidator, type OpenApiValidator } from "./openapi-validator.ts";
import { RawConnection, rawRequest, type ReadOutcome } from "./raw-http.ts";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const document = JSON.parse(readFileSync(path.join(root, "docs", "openapi.json"), "utf8")) as Json;

/* ------------------------------------------------------------------ cases */

export interface FuzzCase {
  /** "http": well-formed HTTP/1.1 on a kept-alive connection; "raw": bytes on a connection of their own. */
  kind: "http" | "raw";
  label: string;
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** kind "raw": the exact bytes. */
  raw?: Buffer;
  /** The X-Request-ID sent (and so expected back), for well-formed requests. */
  requestId?: string;
  /** The body is over the limit: the server may stop reading it. */
  oversize: boolean;
  /** Not HTTP at all: the one case allowed to get no envelope. */
  notHttp?: boolean;
}

export interface FuzzKeys {
  /** All scopes, with an organization. */
  all: string;
  /** A key without organization context. */
  noOrg: string;
  /** assets:read only. */
  readOnly: string;
}

/** Bytes that must reach the wire as they are (numbers JSON.stringify cannot write, bad UTF-8, deep text). */
class Raw {
  constructor(readonly piece: string | Buffer) {}
}

const raw = (piece: string | Buffer) => new Raw(piece);

/** JSON text with Raw pieces spliced in, as bytes. */
function serialize(value: unknown): Buffer {
  const pieces: Array<string | Buffer> = [];
  const write = (v: unknown): void => {
    if (v instanceof Raw) pieces.push(v.piece);
    else if (Array.isArray(v)) {
      pieces.push("[");
      v.forEach((item, i) => {
        if (i) pieces.push(",");
        write(item);
      });
      pieces.push("]");
    } else if (v !== null && typeof v === "object") {
      pieces.push("{");
      Object.entries(v).forEach(([k, item], i) => {
        if (i) pieces.push(",");
        pieces.push(JSON.stringify(k), ":");
        write(item);
      });
      pieces.push("}");
    } else pieces.push(JSON.stringify(v) ?? "null");
  };
  write(value);
  return Buffer.concat(pieces.map((p) => (typeof p === "string" ? Buffer.from(p, "utf8") : p)));
}

/** Percent-encodes text for a URL; a lone surrogate becomes its (invalid) three UTF-8-like bytes. */
function pct(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (/[A-Za-z0-9\-._~]/.test(text[i]!)) {
      out += text[i];
      continue;
    }
    let bytes: number[];
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff) {
      bytes = [...Buffer.from(text.slice(i, i + 2))];
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      bytes = [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)];
    } else bytes = [...Buffer.from(text[i]!)];
    out += bytes.map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("");
  }
  return out;
}

/* ------------------------------------------------------------ arbitraries */

const weighted = <T>(...items: Array<[number, fc.Arbitrary<T>]>) =>
  fc.oneof(...items.map(([weight, arbitrary]) => ({ weight, arbitrary })));

/** Strings that break naive code: controls, NUL, lone surrogates, emoji, RTL, very long. */
const nastyString: fc.Arbitrary<string> = weighted<string>(
  [4, fc.string({ maxLength: 20 })],
  [2, fc.string({ unit: "binary", maxLength: 20 })],
  [2, fc.constantFrom("", " ", "\u0000", "a\u0000b", "\t\n\r", "\u0001\u007f", "😀", "\u202e", "é", "ключ", "\ufeff", "%", "%00", "..", "a,b")],
  [2, fc.constantFrom("\ud800", "x\udc00", "\udbff\udbff", "\ud83d", "a\ud800b")],
  [1, fc.integer({ min: 1, max: 5000 }).map((n) => "x".repeat(n))],
);

/** Numbers JSON can carry but a double cannot, and other awkward ones. */
const nastyNumber: fc.Arbitrary<unknown> = weighted<unknown>(
  [3, fc.constantFrom(raw("1e400"), raw("-1e400"), raw("1E+999"), raw(`1${"0".repeat(400)}`), raw("-0"), raw("1e-400"))],
  [2, fc.constantFrom(0, -1, 1.5, 2147483648, -2147483649, raw("9007199254740993"), 1e308, -1e308, 5e-324)],
  [1, fc.double({ noNaN: true, noDefaultInfinity: true })],
);

/** Deep nesting as text: cheap to build at any depth. */
const deepText = fc
  .tuple(fc.integer({ min: METADATA_MAX_DEPTH - 2, max: 200_000 }), fc.boolean())
  .map(([depth, arrays]) => raw(arrays ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth)));

/** Any JSON value, shallow. */
const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 3 });

/** A wrong JSON type for a field (or a hostile value of any type). */
const wrongValue: fc.Arbitrary<unknown> = weighted<unknown>(
  [2, fc.constantFrom(null, true, false, 0, "", [], {}, [1], { a: 1 })],
  [2, nastyNumber],
  [2, nastyString],
  [1, deepText],
  [1, anyJson],
);

const externalKeyChars = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-".split(""));

/** RFC 3339 timestamps, valid and nearly valid. */
const timestamp: fc.Arbitrary<string> = weighted<string>(
  [5, fc.date({ min: new Date("0001-01-02T00:00:00Z"), max: new Date("9999-12-30T00:00:00Z"), noInvalidDate: true }).map((d) => d.toISOString())],
  [1, fc.constantFrom("2026-11-20T10:15:00.250+05:30", "2026-11-20T10:15:00.123456789Z", "2026-11-20t10:15:00z", "9999-12-31T23:59:59.999999Z")],
  [
    2,
    fc.constantFrom(
      "0001-01-01T00:00:00Z",
      "1970-01-01T00:00:00Z",
      "2026-11-20",
      "2026/11/20T00:00:00Z",
      "2026-13-01T00:00:00Z",
      "2026-02-30T00:00:00Z",
      "2026-01-01T24:00:00Z",
      "0000-01-01T00:00:00Z",
      "10000-01-01T00:00:00Z",
      "2026-01-01T00:00:00+24:00",
      "2026-01-01T00:00:00.Z",
      "",
      "now",
    ),
  ],
);

function resolve(schema: Json): Json {
  let s = schema;
  while (s?.$ref) s = document.components.schemas[String(s.$ref).split("/").pop()!];
  return s ?? {};
}

/** A string for a schema: within its constraints, at them, or beyond them. */
function stringFor(schema: Json, field: string): fc.Arbitrary<unknown> {
  if (schema.format === "date-time") return timestamp;
  if (schema.enum) return weighted<unknown>([6, fc.constantFrom(...(schema.enum as string[]))], [1, nastyString]);
  const max = typeof schema.maxLength === "number" ? (schema.maxLength as number) : field === "metadata" ? 100 : 300;
  const valid = schema.pattern
    ? fc.array(externalKeyChars, { minLength: 1, maxLength: Math.min(max, 40) }).map((cs) => cs.join(""))
    : fc.string({ minLength: 1, maxLength: Math.min(max, 40) });
  const boundary = fc.constantFrom(max, max + 1).chain((n) =>
    fc.constantFrom("x", "é", "😀", "\u0001", "中").map((c) => c.repeat(n)),
  );
  // Huge values are rare: each one costs the whole stack a megabyte.
  return weighted<unknown>([160, valid], [30, boundary], [30, nastyString], [1, fc.constant("x".repeat(900_000))]);
}

function integerFor(schema: Json): fc.Arbitrary<unknown> {
  const min = typeof schema.minimum === "number" ? (schema.minimum as number) : 0;
  const max = typeof schema.maximum === "number" ? (schema.maximum as number) : 2147483647;
  return weighted<unknown>(
    [4, fc.integer({ min: 1, max: 60 })],
    [2, fc.integer({ min, max })],
    [1, fc.constantFrom(min - 1, max + 1, min, max)],
    [1, nastyNumber],
  );
}

/** A metadata object: small JSON, at the size and depth limits, beyond them, or hostile inside. */
const metadata: fc.Arbitrary<unknown> = weighted<unknown>(
  [5, fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 5 })],
  [1, fc.constantFrom(METADATA_MAX_BYTES - 8, METADATA_MAX_BYTES - 7).map((n) => ({ f: "m".repeat(n) }))],
  [1, fc.constantFrom(METADATA_MAX_DEPTH, METADATA_MAX_DEPTH + 1).map((d) => raw('{"a":'.repeat(d - 1) + "{}" + "}".repeat(d - 1)))],
  [1, fc.constantFrom({ __proto__: 1 } as unknown, { constructor: { prototype: 1 } }, { a: raw("1e400") }, { "\ud800": "x" }, { k: "\u0000" })],
  [1, deepText.map((d) => ({ x: d }))],
);

/** A JSON value for a schema node: mostly valid, sometimes hostile. */
function valueFor(schemaIn: Json, field: string, depth = 0): fc.Arbitrary<unknown> {
  const schema = resolve(schemaIn);
  if (field === "metadata") return weighted<unknown>([8, metadata], [1, wrongValue]);
  let base: fc.Arbitrary<unknown>;
  switch (schema.type) {
    case "string":
      base = stringFor(schema, field);
      break;
    case "integer":
    case "number":
      base = integerFor(schema);
      break;
    case "boolean":
      base = fc.boolean();
      break;
    case "array": {
      const item = valueFor(schema.items ?? {}, `${field}[]`, depth + 1);
      base = weighted<unknown>(
        [60, fc.array(item, { maxLength: 4 })],
        [1, fc.constantFrom(TAGS_PER_CREATE_MAX, TAGS_PER_CREATE_MAX + 1, 1000).chain((n) => fc.array(item, { minLength: n, maxLength: n }))],
      );
      break;
    }
    case "object":
      base = depth > 2 ? anyJson : objectFor(schema, depth + 1);
      break;
    default:
      base = anyJson;
  }
  const withNull = schema.nullable ? weighted<unknown>([6, base], [1, fc.constant(null)]) : base;
  return weighted<unknown>([9, withNull], [1, wrongValue]);
}

/** An object for a schema: any subset of its properties, sometimes unknown keys. */
function objectFor(schemaIn: Json, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const schema = resolve(schemaIn);
  const props = Object.entries((schema.properties ?? {}) as Record<string, Json>);
  const required = new Set<string>((schema.required ?? []) as string[]);
  const parts = props.map(([name, prop]) =>
    fc.option(valueFor(prop, name, depth), { freq: required.has(name) ? 8 : 2, nil: undefined }).map((v) => [name, v] as const),
  );
  const unknownKeys = fc.array(
    fc.tuple(fc.constantFrom("__proto__", "constructor", "prototype", "zzz", "", "metadata", "location_id", "Name", "name "), wrongValue),
    { maxLength: 2 },
  );
  return fc.tuple(fc.tuple(...parts), weighted([8, fc.constant([] as Array<[string, unknown]>)], [1, unknownKeys])).map(([known, extra]) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of [...known, ...extra]) {
      if (v !== undefined) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return out;
  });
}

/** Whole bodies that are hostile as a whole. */
const hostileBody: fc.Arbitrary<Buffer> = weighted<Buffer>(
  [2, fc.constantFrom("", "{", "{not json", '{"a":1} x', "null", "[]", "[{}]", '"str"', "1e400", "true", "\ufeff{}", '{"a":1,"a":2}', "{}").map((t) => Buffer.from(t))],
  [1, deepText.map((d) => serialize({ name: "n", metadata: { x: d } }))],
  [1, deepText.map((d) => serialize(d))],
  [
    1,
    fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf], [0xfe, 0xff]).map((bytes) =>
      serialize({ name: raw(Buffer.concat([Buffer.from('"a'), Buffer.from(bytes), Buffer.from('"')])) }),
    ),
  ],
  [1, fc.integer({ min: BODY_LIMIT_BYTES - 200, max: BODY_LIMIT_BYTES - 12 }).map((n) => Buffer.from(`{"name":"${"n".repeat(n)}"}`))],
  [1, fc.constantFrom(BODY_LIMIT_BYTES - 11, BODY_LIMIT_BYTES - 10).map((n) => Buffer.from(`{"name":"${"n".repeat(n)}"}`))],
);

const idSegment: fc.Arbitrary<string> = weighted<string>(
  [12, fc.integer({ min: 1, max: 60 }).map(String)],
  [2, fc.integer({ min: 1, max: 2147483647 }).map(String)],
  [
    3,
    fc.constantFrom(
      "0",
      "-1",
      "2147483647",
      "2147483648",
      "99999999999999999999",
      "9".repeat(300),
      "abc",
      "1.5",
      "1e3",
      "0x10",
      "+1",
      "%20",
      "%00",
      "%E0%A4%A",
      "%2F",
      "..",
      "%C3%A9",
      "%ED%A0%80",
      "%FF",
      "01",
    ),
  ],
);

interface Operation {
  template: string;
  method: string;
  parameters: Json[];
  requestSchema?: Json;
  mediaType?: string;
}

const OPERATIONS: Operation[] = Object.entries(document.paths as Record<string, Json>).flatMap(([template, item]) =>
  Object.entries(item as Record<string, Json>).map(([method, op]) => {
    const content = op.requestBody?.content as Record<string, Json> | undefined;
    const mediaType = content ? Object.keys(content)[0] : undefined;
    return {
      template,
      method: method.toUpperCase(),
      parameters: ((op.parameters ?? []) as Json[]).filter((p) => p.in === "query"),
      ...(mediaType ? { mediaType, requestSchema: content![mediaType]!.schema } : {}),
    };
  }),
);

/** A query value for a parameter schema, as text. */
function queryValueFor(name: string, schema: Json): fc.Arbitrary<string> {
  const s = schema.type === "array" ? (schema.items as Json) : schema;
  const hostile = weighted<string>(
    [2, nastyString],
    [1, fc.constantFrom("", "-1", "1e2", "9223372036854775808", "99999999999999999999", String(OFFSET_MAX + 1), "true,false", "null")],
  );
  let valid: fc.Arbitrary<string>;
  if (s.type === "integer") {
    valid = weighted<string>(
      [4, fc.integer({ min: 0, max: 60 }).map(String)],
      [1, fc.constantFrom(String(s.minimum ?? 0), String(s.maximum ?? OFFSET_MAX), String((s.maximum ?? OFFSET_MAX) + 1))],
    );
  } else if (s.type === "boolean") valid = fc.constantFrom("true", "false", "TRUE", "1");
  else if (s.format === "date-time") valid = timestamp;
  else if (name === "sort") {
    const fields = /Fields: ([^.]*)\./.exec(String((schema as Json).description ?? ""))?.[1]?.split(", ") ?? ["name"];
    valid = fc
      .array(fc.tuple(fc.boolean(), fc.constantFrom(...fields, "id", "bogus")), { minLength: 1, maxLength: 3 })
      .map((keys) => keys.map(([desc, f]) => `${desc ? "-" : ""}${f}`).join(","));
  } else if (name === "q") {
    valid = weighted<string>([4, fc.string({ maxLength: 10 })], [1, fc.constantFrom(Q_MAX_LENGTH, Q_MAX_LENGTH + 1).map((n) => "q".repeat(n))]);
  } else valid = stringFor(s, name).map((v) => (typeof v === "string" ? v.slice(0, 20_000) : JSON.stringify(v) ?? ""));
  return weighted<string>([6, valid], [1, hostile]);
}

function queryFor(op: Operation): fc.Arbitrary<string> {
  const params = op.parameters.map((p) =>
    fc
      .option(
        fc.array(queryValueFor(p.name as string, p.schema as Json), { minLength: 1, maxLength: (p.schema as Json).type === "array" ? 3 : 1 }),
        { freq: 3, nil: undefined },
      )
      .map((values) => (values ?? []).map((v) => `${pct(p.name as string)}=${pct(v)}`)),
  );
  const oddKeys = fc.array(
    fc.tuple(
      weighted<string>(
        [3, fc.constantFrom("__proto__", "constructor", "toString", "hasOwnProperty", "is_active", "sort", "limit", "", "a[b]", "Limit").map(pct)],
        [1, fc.constantFrom("%FF", "%C3", "%ED%A0%80", "%", "%%", "%zz", "+", "a+b")],
        [1, nastyString.map(pct)],
      ),
      fc.constantFrom("1", "", "%FF", "x+y", "%00"),
    ),
    { maxLength: 2 },
  );
  return fc.tuple(fc.tuple(...params), weighted([6, fc.constant([] as Array<[string, string]>)], [1, oddKeys])).map(([known, odd]) => {
    const parts = [...known.flat(), ...odd.map(([k, v]) => `${k}=${v}`)];
    return parts.length ? `?${parts.join("&")}` : "";
  });
}

const oddPath: fc.Arbitrary<string> = weighted<string>(
  [
    3,
    fc.constantFrom(
      "/",
      "/api",
      "/api/v1",
      "/api/v1/",
      "/api/v2/assets",
      "/api/v1/assets/",
      "//api//v1//assets",
      "/api/v1/assets/1/tags/2/x",
      "/api/v1/assets/1/unknown",
      "/api/v1/./assets",
      "/api/v1/assets/../locations",
      "/api/v1/assets/..%2F..%2Fetc%2Fpasswd",
      "/API/V1/ASSETS",
      "/api/v1/assets%2F1",
      "/api/v1/assets;x=1",
      "/healthz",
      "/readyz",
      "/api/v1/orgs/me/",
      "/%",
      "/%zz",
      "/api/v1/assets/%E0%A4%A",
      "*",
      "http://example.test/api/v1/assets",
    ),
  ],
  [1, fc.array(nastyString.map(pct), { minLength: 1, maxLength: 4 }).map((segs) => `/${segs.join("/")}`)],
  [1, fc.array(fc.constantFrom("api", "v1", "assets", "locations", "tags", "1", "rename", "history", "reports"), { maxLength: 6 }).map((s) => `/${s.join("/")}`)],
);

const requestIdArb: fc.Arbitrary<string | undefined> = weighted<string | undefined>(
  [4, fc.constant(undefined)],
  [2, fc.stringMatching(/^[0-9A-Z]{26}$/)],
  [2, fc.string({ unit: fc.constantFrom(..."abcXYZ019-_:/=;,.~!*()[]{}@ ".split("")), minLength: 1, maxLength: 60 }).map((s) => `r${s}r`)],
  [1, fc.integer({ min: 100, max: 8000 }).map((n) => "i".repeat(n))],
);

function authArb(keys: FuzzKeys): fc.Arbitrary<string | undefined> {
  return weighted<string | undefined>(
    [16, fc.constant(`Bearer ${keys.all}`)],
    [1, fc.constant(undefined)],
    [1, fc.constant(`Bearer ${keys.noOrg}`)],
    [1, fc.constant(`Bearer ${keys.readOnly}`)],
    [1, fc.constantFrom("Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "bearer nope", `Bearer ${keys.all}x`, "Bearer wa_", `Token ${keys.all}`)],
  );
}

const contentTypeArb = (expected: string | undefined): fc.Arbitrary<string | undefined> =>
  weighted<string | undefined>(
    [10, fc.constant(expected)],
    [2, fc.constant(expected ? `${expected}; charset=utf-8` : undefined)],
    [
      2,
      fc.constantFrom(
        undefined,
        "application/json",
        "application/merge-patch+json",
        "text/plain",
        "application/json; charset=latin1",
        "application/json; boundary=x",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "*/*",
        "application/json;",
        ";",
      ),
    ],
  );

const oddHeaders: fc.Arbitrary<Array<[string, string]>> = fc.array(
  fc.constantFrom<[string, string]>(
    ["origin", "https://evil.example"],
    ["access-control-request-method", "POST"],
    ["access-control-request-headers", "authorization"],
    ["accept", "text/html"],
    ["accept-encoding", "gzip, br"],
    ["traceparent", "00-00000000000000000000000000000000-0000000000000000-00"],
    ["traceparent", "garbage"],
    ["x-forwarded-for", "1.2.3.4"],
    ["cookie", "wa_session=x"],
    ["idempotency-key", "k"],
    ["range", "bytes=0-1"],
    ["if-none-match", "*"],
  ),
  { maxLength: 2 },
);

const METHOD_NOISE = ["OPTIONS", "PUT", "TRACE", "PROPFIND", "MKCOL", "PURGE", "SEARCH", "LINK", "QUERY"];

function httpCase(keys: FuzzKeys): fc.Arbitrary<FuzzCase> {
  const fromDocument = fc.constantFrom(...OPERATIONS).chain((op) =>
    fc.record({
      op: fc.constant(op),
      method: weighted<string>([10, fc.constant(op.method)], [2, fc.constant(op.method === "GET" ? "HEAD" : op.method)], [1, fc.constantFrom(...METHOD_NOISE, "GET", "POST", "PATCH", "DELETE", "HEAD")]),
      path: fc.array(idSegment, { minLength: 3, maxLength: 3 }).map((ids) => {
        let i = 0;
        return op.template.replace(/\{\w+\}/g, () => ids[i++]!);
      }),
      query: weighted<string>([5, queryFor(op)], [1, fc.constant("")]),
      body: op.requestSchema
        ? weighted<Buffer | undefined>([8, objectFor(op.requestSchema).map(serialize)], [2, hostileBody], [1, fc.constant(undefined)])
        : weighted<Buffer | undefined>([12, fc.constant(undefined)], [1, fc.constant(Buffer.from("{}"))]),
      contentType: contentTypeArb(op.mediaType),
    }),
  );
  const offDocument = fc.record({
    op: fc.constant(undefined as Operation | undefined),
    method: fc.constantFrom("GET", "HEAD", "POST", "PATCH", "DELETE", ...METHOD_NOISE),
    path: oddPath,
    query: weighted<string>([3, fc.constant("")], [1, fc.constantFrom("?a=1", "?__proto__=x", "?%FF=1", "?q=%00")]),
    body: weighted<Buffer | undefined>([4, fc.constant(undefined)], [1, fc.constant(Buffer.from('{"name":"x"}'))]),
    contentType: contentTypeArb("application/json"),
  });
  return fc
    .tuple(
      weighted<{ op: Operation | undefined; method: string; path: string; query: string; body: Buffer | undefined; contentType: string | undefined }>(
        [12, fromDocument],
        [2, offDocument],
      ),
      authArb(keys),
      requestIdArb,
      oddHeaders,
      weighted([30, fc.constant(false)], [1, fc.constant(true)]),
    )
    .map(([r, authorization, requestId, extra, oversize]) => {
      const headers: Array<[string, string]> = [["host", "127.0.0.1"]];
      if (authorization !== undefined) headers.push(["authorization", authorization]);
      if (requestId !== undefined) headers.push(["x-request-id", requestId]);
      let body = r.body;
      if (oversize) body = Buffer.from(`{"name":"${"o".repeat(BODY_LIMIT_BYTES)}"}`);
      if (body !== undefined && r.contentType !== undefined) headers.push(["content-type", r.contentType]);
      headers.push(...extra);
      const method = r.method;
      const sendBody = body !== undefined && method !== "GET" && method !== "HEAD";
      return {
        kind: "http" as const,
        label: `${method} ${r.op?.template ?? "(off document)"}`,
        method,
        target: `${r.path}${r.query}`,
        headers,
        ...(sendBody ? { body } : {}),
        ...(requestId !== undefined ? { requestId } : {}),
        oversize: sendBody && body!.length > BODY_LIMIT_BYTES,
      };
    });
}

/** Malformed HTTP, for the raw socket. */
function rawCase(keys: FuzzKeys): fc.Arbitrary<FuzzCase> {
  const auth = `authorization: Bearer ${keys.all}\r\n`;
  const cases: Array<[string, string | Buffer, boolean?]> = [
    ["percent-encoded slashes", "GET %2Fapi%2Fv1%2Fassets HTTP/1.1\r\nhost: x\r\n\r\n"],
    ["space in the path", `GET /api/v1/as sets HTTP/1.1\r\nhost: x\r\n${auth}\r\n`],
    ["bare from= 5", `GET /api/v1/assets/1/history?from= 5 HTTP/1.1\r\nhost: x\r\n${auth}\r\n`],
    ["HEAD with a space", `HEAD /api/v1/assets?q=a b HTTP/1.1\r\nhost: x\r\n${auth}\r\n`],
    ["HEAD percent slashes", "HEAD %2Fapi HTTP/1.1\r\nhost: x\r\n\r\n"],
    ["tab in the target", "GET /api/v1/\tassets HTTP/1.1\r\nhost: x\r\n\r\n"],
    ["bad version", "GET /api/v1/assets HTTP/7.0\r\nhost: x\r\n\r\n"],
    ["no version", "GET /api/v1/assets\r\nhost: x\r\n\r\n"],
    ["lower-case method", "get /api/v1/assets HTTP/1.1\r\nhost: x\r\n\r\n"],
    ["NUL in the target", Buffer.from("GET /api/v1/a\u0000ssets HTTP/1.1\r\nhost: x\r\n\r\n", "latin1")],
    ["header without a colon", "GET /api/v1/assets HTTP/1.1\r\nhost: x\r\nnonsense\r\n\r\n"],
    ["space in a header name", "GET /api/v1/assets HTTP/1.1\r\nhost: x\r\nbad name: v\r\n\r\n"],
    ["obsolete line folding", `GET /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}x-folded: a\r\n b\r\n\r\n`],
    ["NUL in a header value", Buffer.from(`GET /api/v1/assets HTTP/1.1\r\nhost: x\r\nx-request-id: a\u0000b\r\n\r\n`, "latin1")],
    ["17 KB X-Request-ID", `GET /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}x-request-id: ${"r".repeat(17 * 1024)}\r\n\r\n`],
    ["32 KB of headers", `GET /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}${"x-h: v\r\n".repeat(5000)}\r\n`],
    ["HEAD with a huge head", `HEAD /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}x-pad: ${"p".repeat(20_000)}\r\n\r\n`, true],
    ["an 18 KB path", `GET /api/v1/assets/${"1".repeat(18_000)} HTTP/1.1\r\nhost: x\r\n${auth}\r\n`],
    ["chunked and Content-Length", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n`],
    ["two Content-Lengths", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}`],
    ["a Content-Length that is not a number", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ncontent-length: 1x\r\n\r\n{}`],
    ["a negative Content-Length", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ncontent-length: -1\r\n\r\n{}`],
    ["a bad chunk size", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
    ["an unknown transfer coding", `POST /api/v1/assets HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ntransfer-encoding: gzip\r\n\r\n{}`],
    ["bare LF line ends", `GET /api/v1/assets HTTP/1.1\nhost: x\n\n`],
    ["not HTTP at all", Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]), true],
    ["a CONNECT tunnel", "CONNECT example.test:443 HTTP/1.1\r\nhost: example.test:443\r\n\r\n"],
  ];
  return fc.constantFrom(...cases).map(([label, bytes, flag]) => {
    const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, "latin1");
    const method = buffer.toString("latin1").split(" ")[0]!;
    return {
      kind: "raw" as const,
      label: `raw: ${label}`,
      method,
      target: "",
      headers: [],
      raw: buffer,
      oversize: false,
      ...(label === "not HTTP at all" && flag ? { notHttp: true } : {}),
    };
  });
}

/** Every request the fuzzer sends: mostly from the document, some malformed on the wire. */
export function fuzzCase(keys: FuzzKeys): fc.Arbitrary<FuzzCase> {
  return weighted([24, httpCase(keys)], [1, rawCase(keys)]);
}

/* ---------------------------------------------------------------- checks */

export type ProblemKind = "5xx" | "envelope" | "schema" | "cors" | "request_id" | "connection" | "head_body";

export interface Problem {
  kind: ProblemKind;
  detail: string;
}

export interface Exchange {
  status?: number;
  problems: Problem[];
}

/** The contract every response keeps; `outcome` is what the socket gave back. */
export function checkExchange(c: FuzzCase, outcome: ReadOutcome, validator: OpenApiValidator, reused: boolean): Exchange {
  const problems: Problem[] = [];
  if (outcome.kind !== "response") {
    // Only bytes that are not HTTP, or a body the server stopped reading, may end without an answer.
    if (c.notHttp || c.oversize) return { problems };
    const what = outcome.kind === "garbage" ? `garbage (${outcome.reason})` : outcome.kind;
    problems.push({
      kind: outcome.kind === "garbage" ? "head_body" : "connection",
      detail: `${what} instead of a response${reused ? " on a kept-alive connection" : ""}`,
    });
    return { problems };
  }
  const res = outcome.response;
  const head = c.method === "HEAD";
  const pathname = c.target.split("?")[0]!.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]*/, "");
  // /readyz answers 503 while a service is slow to answer its ping: that is its contract, not a failure.
  const probe503 = pathname === "/readyz" && res.status === 503;
  if (res.status >= 500 && !probe503) problems.push({ kind: "5xx", detail: `status ${res.status}: ${res.body.toString("utf8").slice(0, 300)}` });
  for (const name of Object.keys(res.headers)) {
    if (name.startsWith("access-control-allow-")) problems.push({ kind: "cors", detail: `header ${name}` });
  }
  const requestId = res.headers["x-request-id"];
  if (!requestId) problems.push({ kind: "request_id", detail: "no X-Request-ID header" });
  // A head over the parser's limit (431) is refused before its X-Request-ID can be read: a fresh id is right.
  if (c.kind === "http" && c.requestId !== undefined && res.status !== 431 && requestId !== c.requestId) {
    problems.push({ kind: "request_id", detail: `X-Request-ID ${requestId?.slice(0, 40)} is not the one sent` });
  }
  let body: unknown;
  if (res.body.length) {
    if (head) problems.push({ kind: "head_body", detail: "a HEAD response carried a body" });
    try {
      body = JSON.parse(res.body.toString("utf8"));
    } catch {
      problems.push({ kind: res.status >= 300 ? "envelope" : "schema", detail: `body is not JSON: ${res.body.toString("latin1").slice(0, 120)}` });
    }
  }
  if (res.status < 200 || res.status >= 300) {
    if (res.headers["content-type"] !== "application/json") {
      problems.push({ kind: "envelope", detail: `Content-Type ${res.headers["content-type"]} on ${res.status}` });
    }
    if (!head) {
      const error = (body as Json | undefined)?.error as Json | undefined;
      const keysOk =
        !!error &&
        Object.keys(body as Json).length === 1 &&
        ["type", "title", "status", "detail", "instance", "request_id"].every((k) => k in error) &&
        typeof error.type === "string" &&
        typeof error.title === "string" &&
        typeof error.detail === "string" &&
        typeof error.instance === "string" &&
        error.status === res.status &&
        (error.type === "validation_error") === Array.isArray(error.fields);
      if (!keysOk) problems.push({ kind: "envelope", detail: `not the envelope on ${res.status}: ${res.body.toString("utf8").slice(0, 200)}` });
      else if (error.request_id !== requestId) {
        problems.push({ kind: "envelope", detail: `error.request_id ${String(error.request_id).slice(0, 30)} differs from X-Request-ID` });
      } else if (c.kind === "http" && res.status !== 431 && error.instance !== pathname) {
        problems.push({ kind: "envelope", detail: `error.instance ${String(error.instance).slice(0, 60)} is not the request path` });
      }
    }
  } else if (c.kind === "http" && !/^\/(healthz|readyz)$/.test(pathname)) {
    const found = validator.check(c.method, pathname, res.status, head ? (res.body.length ? body : undefined) : body);
    for (const p of found) problems.push({ kind: "schema", detail: p });
    if (!head && res.body.length && res.headers["content-type"] !== "application/json") {
      problems.push({ kind: "schema", detail: `Content-Type ${res.headers["content-type"]} on ${res.status}` });
    }
  }
  return { status: res.status, problems };
}

/* ---------------------------------------------------------------- runner */

export interface FuzzTotals {
  requests: number;
  byClass: Record<string, number>;
  fiveXx: number;
  envelopeViolations: number;
  otherViolations: Record<string, number>;
  examples: Array<{ label: string; target: string; problems: Problem[] }>;
  durationMs: number;
}

export function emptyTotals(): FuzzTotals {
  return { requests: 0, byClass: {}, fiveXx: 0, envelopeViolations: 0, otherViolations: {}, examples: [], durationMs: 0 };
}

export function record(totals: FuzzTotals, c: FuzzCase, exchange: Exchange, maxExamples = 25): void {
  totals.requests++;
  const cls = exchange.status === undefined ? "none" : `${Math.floor(exchange.status / 100)}xx`;
  totals.byClass[cls] = (totals.byClass[cls] ?? 0) + 1;
  for (const p of exchange.problems) {
    if (p.kind === "5xx") totals.fiveXx++;
    else if (p.kind === "envelope") totals.envelopeViolations++;
    else totals.otherViolations[p.kind] = (totals.otherViolations[p.kind] ?? 0) + 1;
  }
  if (exchange.problems.length && totals.examples.length < maxExamples) {
    totals.examples.push({ label: c.label, target: c.target.slice(0, 200), problems: exchange.problems });
  }
}

/**
 * Sends cases on kept-alive connections (a new one after `Connection: close`
 * or a malformed request) and checks every answer.
 */
export class FuzzClient {
  private conn: RawConnection | undefined;
  private used = 0;
  private readonly validator = createOpenApiValidator();

  constructor(private readonly port: number) {}

  async send(c: FuzzCase): Promise<Exchange> {
    if (c.kind === "raw") {
      const conn = await RawConnection.open(this.port);
      try {
        conn.send(c.raw!);
        const outcome = await conn.read({ head: c.method === "HEAD", timeoutMs: 30_000 });
        const exchange = checkExchange(c, outcome, this.validator, false);
        if (outcome.kind === "response" && outcome.response.headers.connection !== "close" && !c.notHttp) {
          // The server kept the connection: it must still serve a request.
          conn.send(rawRequest("GET", "/healthz", [["host", "x"]]));
          const next = await conn.read({ timeoutMs: 30_000 });
          if (next.kind !== "response") exchange.problems.push({ kind: "connection", detail: `${next.kind} after an answer without Connection: close` });
        }
        return exchange;
      } finally {
        conn.close();
      }
    }
    if (!this.conn || this.conn.closed) {
      this.conn = await RawConnection.open(this.port);
      this.used = 0;
    }
    const conn = this.conn;
    const reused = this.used > 0;
    this.used++;
    conn.send(rawRequest(c.method, c.target, c.headers, c.body));
    const outcome = await conn.read({ head: c.method === "HEAD", timeoutMs: 30_000 });
    const exchange = checkExchange(c, outcome, this.validator, reused);
    if (outcome.kind !== "response" || outcome.response.headers.connection === "close" || c.oversize) {
      conn.close();
      this.conn = undefined;
    } else if (c.method === "HEAD" && conn.pending.length) {
      exchange.problems.push({ kind: "head_body", detail: `${conn.pending.length} bytes after a HEAD response` });
      conn.close();
      this.conn = undefined;
    }
    return exchange;
  }

  close(): void {
    this.conn?.close();
    this.conn = undefined;
  }
}

export function formatTotals(t: FuzzTotals): string {
  const lines = [
    `requests: ${t.requests} in ${(t.durationMs / 1000).toFixed(1)} s (${Math.round(t.requests / Math.max(t.durationMs / 1000, 0.001))}/s)`,
    `by status class: ${Object.entries(t.byClass)
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
    `5xx: ${t.fiveXx}`,
    `envelope violations: ${t.envelopeViolations}`,
    `other violations: ${JSON.stringify(t.otherViolations)}`,
  ];
  for (const e of t.examples) lines.push(`  ${e.label} ${e.target}: ${e.problems.map((p) => `[${p.kind}] ${p.detail}`).join("; ")}`);
  return lines.join("\n");
}
