/**
 * Request bodies: the top level must be a JSON object; zod issues become the
 * spec's fields[] entries (a wrong JSON type is a bad_request naming the field,
 * thrown at once). Errors are returned rather than thrown so that one response
 * can list them together with the read-only and reference checks.
 */
import type { z } from "zod";
import {
  badRequest,
  checkJsonValue,
  DETAIL_WRONG_TOP_LEVEL,
  fieldError,
  issuesToFields,
  jsonProblemsError,
  toMicrosText,
  parseInstant,
  ValidationError,
  type FieldError,
} from "@whereabouts/shared";

export type JsonObject = Record<string, unknown>;

export function isJsonObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * The body as an object, after the checks that must precede any recursive
 * walk or schema: nesting depth, lone surrogates, non-finite numbers (the
 * gateway checks the same on the raw text; this holds for any caller).
 */
export function requireObject(body: unknown): JsonObject {
  if (!isJsonObject(body)) throw badRequest(DETAIL_WRONG_TOP_LEVEL);
  const problem = jsonProblemsError(checkJsonValue(body));
  if (problem) throw problem;
  return body;
}

export interface Parsed<T> {
  /** Present when the whole body passed the schema. */
  data: T | undefined;
  fields: FieldError[];
  /** Top-level keys with at least one error. */
  failed: Set<string>;
}

export function parseObject<S extends z.ZodType>(schema: S, body: JsonObject): Parsed<z.output<S>> {
  const result = schema.safeParse(body);
  if (result.success) return { data: result.data, fields: [], failed: new Set() };
  const fields = issuesToFields(result.error.issues, body);
  const failed = new Set(fields.map((f) => f.field.split(/[.[]/)[0]!));
  return { data: undefined, fields, failed };
}

export function throwIfAny(fields: FieldError[]): void {
  if (fields.length) throw new ValidationError(fields);
}

/** A validated validity timestamp as stored (µs, UTC); null and absent stay so. */
export function storedInstant(value: string): string;
export function storedInstant(value: string | undefined): string | undefined;
export function storedInstant(value: string | null | undefined): string | null | undefined;
export function storedInstant(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const instant = parseInstant(value);
  const text = instant && toMicrosText(instant);
  if (!text) throw new Error(`unvalidated timestamp ${value}`);
  return text;
}

export const readOnlyError = (field: string, message: string) => fieldError(field, "read_only", message);

/** Order-insensitive structural equality of JSON values. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isJsonObject(a) && isJsonObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}
