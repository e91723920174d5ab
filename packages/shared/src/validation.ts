/**
 * Turning bad input into the spec's errors: zod issues into fields[] entries,
 * path ids, and the common list parameters (limit, offset, sort, booleans,
 * unknown keys). Used by the gateway (generic rules) and by every service.
 */
import type { z } from "zod";
import { AppError, badRequest, fieldError, ValidationError, VALIDATION_CODES, type FieldError, type ValidationCode } from "./errors.ts";
import { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, MAX_ID } from "./contracts/common.ts";
import { longerThan, OFFSET_MAX, Q_MAX_LENGTH } from "./limits.ts";

export const DETAIL_NOT_JSON = "Request body is not valid JSON";
export const DETAIL_WRONG_TOP_LEVEL = "Request body could not be decoded as the expected type";
export const DETAIL_NULL_PATCH = "Request body must be a JSON object (RFC 7396)";

const fieldPath = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("");

/**
 * Maps zod issues to fields[]. A value of the wrong JSON type is a bad_request
 * naming the field (spec: errors table), so it is thrown rather than listed.
 */
export function issuesToFields(issues: z.core.$ZodIssue[], input: unknown): FieldError[] {
  const fields: FieldError[] = [];
  for (const issue of issues) {
    const field = fieldPath(issue.path);
    switch (issue.code) {
      case "unrecognized_keys":
        for (const key of issue.keys) {
          const name = field ? `${field}.${key}` : key;
          fields.push(fieldError(name, "unknown_field", `${name} is not a known field`));
        }
        break;
      case "invalid_type": {
        const value = valueAt(input, issue.path);
        if (value === undefined) fields.push(fieldError(field, "required", `${field} is required`));
        else if (value === null) fields.push(fieldError(field, "invalid_value", `${field} must not be null`));
        else throw badRequest(`Field '${field}' has the wrong type: expected ${issue.expected}`);
        break;
      }
      case "too_small":
        if (issue.origin === "string") {
          fields.push(fieldError(field, "too_short", issue.message || `${field} is too short`, { min_length: Number(issue.minimum) }));
        } else if (issue.origin === "array") {
          fields.push(fieldError(field, "too_short", issue.message || `${field} has too few items`, { min_items: Number(issue.minimum) }));
        } else {
          fields.push(fieldError(field, "too_small", issue.message || `${field} is too small`, { min: Number(issue.minimum) }));
        }
        break;
      case "too_big":
        if (issue.origin === "string") {
          fields.push(fieldError(field, "too_long", issue.message || `${field} is too long`, { max_length: Number(issue.maximum) }));
        } else if (issue.origin === "array") {
          fields.push(fieldError(field, "too_long", issue.message || `${field} has too many items`, { max_items: Number(issue.maximum) }));
        } else {
          fields.push(fieldError(field, "too_large", issue.message || `${field} is too large`, { max: Number(issue.maximum) }));
        }
        break;
      case "invalid_value":
        fields.push(
          fieldError(field, "invalid_value", issue.message || `${field} has an invalid value`, {
            allowed_values: issue.values,
          }),
        );
        break;
      case "invalid_union": {
        const value = valueAt(input, issue.path);
        if (value === undefined) fields.push(fieldError(field, "required", `${field} is required`));
        else fields.push(fieldError(field, "invalid_value", issue.message || `${field} has an invalid value`));
        break;
      }
      case "custom": {
        // A rule may name its code and params: `params: { code: "too_long", max_bytes: 65536 }`.
        const { code, ...params } = (issue.params ?? {}) as { code?: unknown } & Record<string, unknown>;
        const known = typeof code === "string" && (VALIDATION_CODES as readonly string[]).includes(code);
        fields.push(
          fieldError(
            field,
            known ? (code as ValidationCode) : "invalid_value",
            issue.message || `${field} has an invalid value`,
            Object.keys(params).length ? params : undefined,
          ),
        );
        break;
      }
      default:
        fields.push(fieldError(field, "invalid_value", issue.message || `${field} has an invalid value`));
    }
  }
  return fields;
}

function valueAt(input: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let current: unknown = input;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Parses a JSON body that must be an object, with the spec's errors. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest(DETAIL_WRONG_TOP_LEVEL);
  const result = schema.safeParse(body);
  if (!result.success) throw new ValidationError(issuesToFields(result.error.issues, body));
  return result.data;
}

/** Path ids: integers in 1..2147483647. */
export function parsePathId(name: string, raw: string | undefined): number {
  const text = raw ?? "";
  if (!/^-?\d+$/.test(text)) {
    throw new ValidationError([fieldError(name, "invalid_value", `${name} must be an integer`, { min: 1, max: MAX_ID })]);
  }
  const value = Number(text);
  if (value < 1) throw new ValidationError([fieldError(name, "too_small", `${name} must be at least 1`, { min: 1 })]);
  if (value > MAX_ID) {
    throw new ValidationError([fieldError(name, "too_large", `${name} must be at most ${MAX_ID}`, { max: MAX_ID })]);
  }
  return value;
}

export interface SortKey<F extends string> {
  field: F;
  descending: boolean;
}

/**
 * Reads a request's query: every key must be declared, single-valued keys
 * must appear once, and errors are collected so one response lists them all.
 */
export class QueryReader {
  readonly errors: FieldError[] = [];
  private readonly seen = new Set<string>();

  constructor(private readonly query: Record<string, string[]>) {}

  private take(name: string): string[] {
    this.seen.add(name);
    return this.query[name] ?? [];
  }

  has(name: string): boolean {
    return (this.query[name]?.length ?? 0) > 0;
  }

  fail(name: string, code: FieldError["code"], message: string, params?: Record<string, unknown>): void {
    this.errors.push(fieldError(name, code, message, params));
  }

  /** Declares a key the endpoint accepts without reading it here. */
  declare(...names: string[]): void {
    for (const name of names) this.seen.add(name);
  }

  one(name: string): string | undefined {
    const values = this.take(name);
    if (values.length > 1) {
      this.fail(name, "invalid_value", `${name} may be given only once`);
      return undefined;
    }
    return values[0];
  }

  many(name: string): string[] {
    return this.take(name);
  }

  bool(name: string): boolean | undefined {
    const raw = this.one(name);
    if (raw === undefined) return undefined;
    if (raw === "true") return true;
    if (raw === "false") return false;
    this.fail(name, "invalid_value", `${name} must be true or false`, { allowed_values: ["true", "false"] });
    return undefined;
  }

  int(name: string, options: { min: number; max?: number; default: number }): number {
    const raw = this.one(name);
    if (raw === undefined) return options.default;
    if (!/^-?\d+$/.test(raw)) {
      this.fail(name, "invalid_value", `${name} must be an integer`);
      return options.default;
    }
    const value = Number(raw);
    if (value < options.min) {
      this.fail(name, "too_small", `${name} must be at least ${options.min}`, { min: options.min });
      return options.default;
    }
    if (options.max !== undefined && value > options.max) {
      this.fail(name, "too_large", `${name} must be at most ${options.max}`, { max: options.max });
      return options.default;
    }
    return value;
  }

  /** Repeatable integer ids ("any of"). */
  ids(name: string): number[] {
    const out: number[] = [];
    for (const raw of this.many(name)) {
      try {
        out.push(parsePathId(name, raw));
      } catch (err) {
        if (err instanceof ValidationError) this.errors.push(...err.fields);
        else throw err;
      }
    }
    return out;
  }

  page(): { limit: number; offset: number } {
    return {
      limit: this.int("limit", { min: 1, max: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT }),
      offset: this.int("offset", { min: 0, max: OFFSET_MAX, default: 0 }),
    };
  }

  sort<F extends string>(allowed: readonly F[], fallback: SortKey<F>[]): SortKey<F>[] {
    const raw = this.one("sort");
    if (raw === undefined) return fallback;
    const keys: SortKey<F>[] = [];
    for (const part of raw.split(",")) {
      const descending = part.startsWith("-");
      const name = descending ? part.slice(1) : part;
      if (!(allowed as readonly string[]).includes(name)) {
        this.fail("sort", "invalid_value", `unknown sort field: ${name}`, { allowed_values: allowed });
        continue;
      }
      keys.push({ field: name as F, descending });
    }
    return keys.length ? keys : fallback;
  }

  /**
   * The `q` substring search (DECISIONS.md): at most Q_MAX_LENGTH characters
   * (too_long), no NUL (invalid_value); empty means no search.
   */
  search(name = "q"): string | undefined {
    const q = this.one(name);
    if (q === undefined || q === "") return undefined;
    if (longerThan(q, Q_MAX_LENGTH)) {
      this.fail(name, "too_long", `${name} must be at most ${Q_MAX_LENGTH} characters`, { max_length: Q_MAX_LENGTH });
      return undefined;
    }
    if (q.includes("\u0000")) {
      this.fail(name, "invalid_value", `${name} must not contain NUL characters`);
      return undefined;
    }
    return q;
  }

  /** Rejects a sort parameter outright (tree endpoints). */
  noSort(): void {
    if (this.has("sort")) {
      this.take("sort");
      this.fail("sort", "invalid_value", "sort parameter not supported on this endpoint");
    }
  }

  /** Throws every collected error, unknown keys included. */
  finish(): void {
    for (const key of Object.keys(this.query)) {
      if (!this.seen.has(key)) this.fail(key, "unknown_field", `${key} is not a known query parameter`);
    }
    if (this.errors.length) throw new ValidationError(this.errors);
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
