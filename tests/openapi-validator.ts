/**
 * Validates response bodies against docs/openapi.json, and a small API client
 * for the catalog's end-to-end tests that checks every response it receives.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { BODY_MEDIA_TYPES } from "@whereabouts/shared";
import type { Stack } from "./harness.ts";

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

type Json = Record<string, unknown>;
interface ResponseObject {
  content?: Record<string, { schema?: { $ref?: string } }>;
}
interface Operation {
  responses: Record<string, ResponseObject>;
}

export interface OpenApiValidator {
  /** Problems with this response (empty when it conforms to the document). */
  check(method: string, url: string, status: number, body: unknown): string[];
}

export function createOpenApiValidator(file = path.join(root, "docs", "openapi.json")): OpenApiValidator {
  const document = JSON.parse(readFileSync(file, "utf8")) as { paths: Record<string, Record<string, Operation>> };
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(document as unknown as Json, "openapi.json");
  const templates = Object.keys(document.paths).map((template) => ({
    template,
    pattern: new RegExp(`^${template.replace(/\{\w+\}/g, "[^/]+")}$`),
  }));
  const compiled = new Map<string, ValidateFunction>();

  return {
    check(method, url, status, body) {
      const pathname = url.split("?")[0]!;
      const match = templates.find((t) => t.pattern.test(pathname));
      if (!match) return [`${pathname} is not a documented path`];
      const verb = method.toUpperCase() === "HEAD" ? "get" : method.toLowerCase();
      const operation = document.paths[match.template]![verb];
      if (!operation) return [`${method} ${match.template} is not documented`];
      const response = operation.responses[String(status)];
      if (!response) return [`status ${status} is not documented for ${method} ${match.template}`];
      if (method.toUpperCase() === "HEAD" || status === 204) {
        return body === undefined ? [] : [`status ${status} must have no body`];
      }
      const ref = response.content?.["application/json"]?.schema?.$ref;
      if (!ref) return body === undefined ? [] : [`no body documented for ${status}`];
      let validate = compiled.get(ref);
      if (!validate) {
        validate = ajv.compile({ $ref: `openapi.json${ref}` });
        compiled.set(ref, validate);
      }
      if (validate(body)) return [];
      return (validate.errors ?? []).map((e) => `${ref}${e.instancePath} ${e.message}`);
    },
  };
}

let shared: OpenApiValidator | undefined;
const validator = () => (shared ??= createOpenApiValidator());

export interface ApiResponse<T = Json> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
}

/**
 * Calls the API through the real gateway with the tenant's key. Every
 * response body is validated against the OpenAPI document: a mismatch fails
 * the test with the reasons.
 */
export function apiClient(stack: Stack, auth: Record<string, string>) {
  return async function call<T = Json>(
    method: "GET" | "HEAD" | "POST" | "PATCH" | "DELETE",
    url: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...auth, ...extraHeaders };
    let payload: string | undefined;
    if (body !== undefined) {
      headers["content-type"] ??= BODY_MEDIA_TYPES[method] ?? "application/json";
      payload = typeof body === "string" ? body : JSON.stringify(body);
    }
    const res = await stack.gateway.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
    const parsed = res.body === "" ? undefined : (JSON.parse(res.body) as unknown);
    const problems = validator().check(method, url, res.statusCode, parsed);
    if (problems.length) {
      throw new Error(`${method} ${url} -> ${res.statusCode} does not match docs/openapi.json:\n  ${problems.join("\n  ")}\n${res.body}`);
    }
    return { status: res.statusCode, headers: res.headers, body: parsed as T };
  };
}
export type ApiCall = ReturnType<typeof apiClient>;
