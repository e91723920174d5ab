/**
 * Renders docs/openapi.json (OpenAPI 3.0.3) from the operation catalog of
 * packages/shared (contracts/operations.ts): paths, methods, parameters,
 * bodies, replies and errors all come from there; this file only knows how
 * OpenAPI writes them. HEAD is supported wherever GET is but deliberately not
 * declared.
 *
 *   npx tsx scripts/openapi.ts          writes docs/openapi.json
 *   npx tsx scripts/openapi.ts --check  exits 1 when the file is stale
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import {
  ERROR_HEADERS,
  ERROR_TYPES,
  ErrorEnvelope,
  HTTP_METHODS,
  OPERATION_ROUTES,
  REPLY_SCHEMAS,
  REQUEST_SCHEMAS,
  RESPONSE_HEADERS,
  type ErrorType,
  type Operation,
} from "@whereabouts/shared";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const OPENAPI_FILE = path.join(root, "docs", "openapi.json");

type Json = Record<string, unknown>;

/* ---------------------------------------------------------------- schemas */

const SAFE_INT = Number.MAX_SAFE_INTEGER;

/** OpenAPI 3.0 schema objects have no $id; zod's ±2^53 integer bounds are noise. */
function tidy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidy);
  if (!value || typeof value !== "object") return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === "$id") continue;
    if ((key === "minimum" && v === -SAFE_INT) || (key === "maximum" && v === SAFE_INT)) continue;
    out[key] = tidy(v);
  }
  return out;
}

type Registry = typeof REPLY_SCHEMAS;
const componentUri = (id: string) => `#/components/schemas/${id}`;

function componentSchemas(registry: Registry, io: "input" | "output"): Json {
  const result = z.toJSONSchema(registry, { target: "openapi-3.0", io, uri: componentUri });
  return tidy(result.schemas) as Json;
}

/** A reference to a named schema of the catalog (every body and reply has a name). */
function ref(registry: Registry, schema: z.ZodType, what: string): Json {
  const id = registry.get(schema)?.id;
  if (!id) throw new Error(`${what} has no name in the operation catalog`);
  return { $ref: componentUri(id) };
}

/** An inline schema (a parameter's), with its description lifted out. */
function inlineSchema(schema: z.ZodType): { schema: Json; description: string | undefined } {
  const json = tidy(z.toJSONSchema(schema, { target: "openapi-3.0", io: "input" })) as Json;
  const { description, ...rest } = json;
  return { schema: rest, description: typeof description === "string" ? description : schema.description };
}

/* ------------------------------------------------------------- parameters */

function parameters(op: Operation): Json[] {
  const out: Json[] = [];
  for (const [name, schema] of Object.entries(op.params.shape)) {
    out.push({ name, in: "path", required: true, schema: inlineSchema(schema as z.ZodType).schema });
  }
  for (const [name, field] of Object.entries(op.query.shape)) {
    const schema = field as z.ZodType;
    const { schema: json, description } = inlineSchema(schema);
    // A repeatable key ("any of"): the array form, one key=value pair per item.
    const repeated = json.type === "array" ? { style: "form", explode: true } : {};
    out.push({ name, in: "query", required: !schema.safeParse(undefined).success, description, schema: json, ...repeated });
  }
  return out;
}

/* ------------------------------------------------------------- operations */

/** What each status means: the error types answering with it, and the headers they carry. */
function errorDescription(status: number): string {
  const types = (Object.keys(ERROR_TYPES) as ErrorType[]).filter((t) => ERROR_TYPES[t].status === status);
  const notes = [...new Set(types.map((t) => ERROR_HEADERS[t]).filter(Boolean))];
  return `${types.join(" or ")}${notes.length ? ` (${notes.join("; ")})` : ""}`;
}

const responseHeaders = (): Json =>
  Object.fromEntries(Object.entries(RESPONSE_HEADERS).map(([name, description]) => [name, { description, schema: { type: "string" } }]));

function errorResponse(status: number): Json {
  return {
    description: errorDescription(status),
    headers: responseHeaders(),
    content: { "application/json": { schema: ref(REPLY_SCHEMAS, ErrorEnvelope, "ErrorEnvelope") } },
  };
}

function operationObject(op: Operation): Json {
  const success: Json = {
    description: op.status === 204 ? "No content" : "Success",
    headers: {
      ...responseHeaders(),
      ...(op.location ? { Location: { description: op.location, schema: { type: "string" } } } : {}),
    },
    ...(op.reply
      ? {
          content: {
            "application/json": { schema: ref(REPLY_SCHEMAS, op.reply, `${op.name} reply`) },
            ...Object.fromEntries(Object.entries(op.alternates ?? {}).map(([media, description]) => [media, { schema: { type: "string", description } }])),
          },
        }
      : {}),
  };
  const responses: Json = { [String(op.status)]: success };
  for (const status of [...new Set(op.errors.map((t) => ERROR_TYPES[t].status))].sort((a, b) => a - b)) {
    responses[String(status)] = errorResponse(status);
  }
  return {
    operationId: op.name.replace(/\.(\w)/g, (_, c: string) => c.toUpperCase()),
    summary: op.summary,
    description: op.scope ? `Requires scope ${op.scope}.` : "Requires no scope.",
    security: [{ bearerAuth: [] }],
    parameters: parameters(op),
    ...(op.body
      ? { requestBody: { required: true, content: { [op.body.media]: { schema: ref(REQUEST_SCHEMAS, op.body.schema, `${op.name} body`) } } } }
      : {}),
    responses,
  };
}

export function buildOpenApiDocument(): Json {
  const paths: Json = {};
  for (const route of OPERATION_ROUTES) {
    const item: Json = {};
    for (const method of HTTP_METHODS) {
      const op = route.methods[method];
      if (op) item[method.toLowerCase()] = operationObject(op);
    }
    paths[route.path.replace(/:(\w+)/g, "{$1}")] = item;
  }
  return {
    openapi: "3.0.3",
    info: {
      title: "Whereabouts: asset and location tracking API",
      version: "1.0.0",
      description:
        "Multi-tenant JSON API for assets, locations (a tree) and tags. HEAD is supported wherever GET is, " +
        "with the same status and headers and no body; it is deliberately not declared here. " +
        "Every non-2xx response carries the error envelope (application/json).",
    },
    servers: [{ url: "{base_url}", variables: { base_url: { default: "http://127.0.0.1:8080" } } }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "API key" } },
      schemas: { ...componentSchemas(REPLY_SCHEMAS, "output"), ...componentSchemas(REQUEST_SCHEMAS, "input") },
    },
  };
}

export const renderOpenApi = () => `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  const text = renderOpenApi();
  if (process.argv.includes("--check")) {
    const current = await readFile(OPENAPI_FILE, "utf8").catch(() => "");
    if (current !== text) {
      console.error("docs/openapi.json is stale: run npx tsx scripts/openapi.ts");
      process.exit(1);
    }
  } else {
    await writeFile(OPENAPI_FILE, text);
    console.log(`wrote ${path.relative(root, OPENAPI_FILE)}`);
  }
}
