/**
 * The error envelope of the spec, one class per error type. Domain code throws
 * these; each service's RPC wrapper turns them into a reply, and the gateway
 * renders replies (and its own errors) as HTTP, once.
 */
import { z } from "zod";
import { FIELD_ERRORS_MAX } from "./limits.ts";

export const ERROR_TYPES = {
  validation_error: { status: 400, title: "Validation failed" },
  bad_request: { status: 400, title: "Bad request" },
  unauthorized: { status: 401, title: "Unauthorized" },
  forbidden: { status: 403, title: "Forbidden" },
  not_found: { status: 404, title: "Not found" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  conflict: { status: 409, title: "Conflict" },
  gone: { status: 410, title: "Gone" },
  request_timeout: { status: 408, title: "Request timeout" },
  payload_too_large: { status: 413, title: "Payload too large" },
  unsupported_media_type: { status: 415, title: "Unsupported media type" },
  missing_org_context: { status: 422, title: "Missing org context" },
  rate_limited: { status: 429, title: "Rate limited" },
  request_header_fields_too_large: { status: 431, title: "Request header fields too large" },
  internal_error: { status: 500, title: "Internal server error" },
  service_unavailable: { status: 503, title: "Service unavailable" },
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

export const VALIDATION_CODES = [
  "required",
  "invalid_value",
  "unknown_field",
  "too_short",
  "too_long",
  "too_small",
  "too_large",
  "fk_not_found",
  "ambiguous_fields",
  "read_only",
] as const;
export type ValidationCode = (typeof VALIDATION_CODES)[number];

export const FieldError = z.object({
  field: z.string(),
  code: z.enum(VALIDATION_CODES),
  message: z.string(),
  params: z.record(z.string(), z.unknown()).optional(),
});
export type FieldError = z.infer<typeof FieldError>;

export const ErrorBody = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  instance: z.string(),
  request_id: z.string(),
  fields: z.array(FieldError).optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

export const ErrorEnvelope = z.object({ error: ErrorBody });
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

export class AppError extends Error {
  override readonly name: string = "AppError";
  readonly headers: Record<string, string>;
  constructor(
    readonly type: ErrorType,
    readonly detail: string,
    options: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(detail, { cause: options.cause });
    this.headers = options.headers ?? {};
  }
  get status(): number {
    return ERROR_TYPES[this.type].status;
  }
}

export class ValidationError extends AppError {
  override readonly name = "ValidationError";
  /** At most FIELD_ERRORS_MAX entries (a hostile body could yield millions); detail counts them all. */
  readonly fields: FieldError[];
  constructor(fields: FieldError[]) {
    super("validation_error", validationDetail(fields));
    this.fields = fields.length > FIELD_ERRORS_MAX ? fields.slice(0, FIELD_ERRORS_MAX) : fields;
  }
}

/** `detail` repeats the first entry's message, counting the rest. */
export function validationDetail(fields: FieldError[]): string {
  const first = fields[0]?.message ?? "Validation failed";
  const more = fields.length - 1;
  return more > 0 ? `${first} (and ${more} more validation error${more === 1 ? "" : "s"})` : first;
}

export const badRequest = (detail: string) => new AppError("bad_request", detail);
export const notFound = (detail = "Resource not found") => new AppError("not_found", detail);
export const conflict = (detail: string) => new AppError("conflict", detail);
export const forbidden = (detail: string) => new AppError("forbidden", detail);
export const unauthorized = (detail: string) => new AppError("unauthorized", detail);
export const serviceUnavailable = (detail: string, retryAfterSeconds = 1) =>
  new AppError("service_unavailable", detail, { headers: { "retry-after": String(retryAfterSeconds) } });

export function fieldError(
  field: string,
  code: ValidationCode,
  message: string,
  params?: Record<string, unknown>,
): FieldError {
  return params ? { field, code, message, params } : { field, code, message };
}

export const invalid = (field: string, code: ValidationCode, message: string, params?: Record<string, unknown>) =>
  new ValidationError([fieldError(field, code, message, params)]);

export function errorBody(
  type: ErrorType,
  detail: string,
  ctx: { instance: string; request_id: string },
  fields?: FieldError[],
): ErrorEnvelope {
  const { status, title } = ERROR_TYPES[type];
  const error: ErrorBody = { type, title, status, detail, instance: ctx.instance, request_id: ctx.request_id };
  if (type === "validation_error") error.fields = fields ?? [];
  return { error };
}

/** Any thrown value as an envelope; unknown errors hide their text. */
export function toErrorEnvelope(err: unknown, ctx: { instance: string; request_id: string }): ErrorEnvelope {
  if (err instanceof ValidationError) return errorBody("validation_error", err.detail, ctx, err.fields);
  if (err instanceof AppError) return errorBody(err.type, err.detail, ctx);
  return errorBody("internal_error", "An unexpected error occurred", ctx);
}
