import { describe, expect, it } from "vitest";
import { FIELD_ERRORS_MAX } from "./limits.ts";
import { AppError, ERROR_TYPES, errorBody, serviceUnavailable, toErrorEnvelope, ValidationError, validationDetail } from "./errors.ts";

describe("error types", () => {
  it("have the spec's titles and statuses (and DECISIONS.md's 413 and 503, the HTTP parser's 408 and 431, the event feed's 410)", () => {
    expect(Object.fromEntries(Object.entries(ERROR_TYPES).map(([type, { status, title }]) => [type, [status, title]]))).toEqual({
      validation_error: [400, "Validation failed"],
      bad_request: [400, "Bad request"],
      unauthorized: [401, "Unauthorized"],
      forbidden: [403, "Forbidden"],
      not_found: [404, "Not found"],
      method_not_allowed: [405, "Method not allowed"],
      request_timeout: [408, "Request timeout"],
      conflict: [409, "Conflict"],
      gone: [410, "Gone"],
      payload_too_large: [413, "Payload too large"],
      unsupported_media_type: [415, "Unsupported media type"],
      missing_org_context: [422, "Missing org context"],
      rate_limited: [429, "Rate limited"],
      request_header_fields_too_large: [431, "Request header fields too large"],
      internal_error: [500, "Internal server error"],
      service_unavailable: [503, "Service unavailable"],
    });
  });

  it("a validation_error lists at most FIELD_ERRORS_MAX entries; detail counts them all", () => {
    const many = Array.from({ length: FIELD_ERRORS_MAX + 50 }, (_, i) => ({ field: `f${i}`, code: "unknown_field" as const, message: `f${i} is not a known field` }));
    const err = new ValidationError(many);
    expect(err.fields).toHaveLength(FIELD_ERRORS_MAX);
    expect(err.detail).toBe(`f0 is not a known field (and ${FIELD_ERRORS_MAX + 49} more validation errors)`);
  });

  it("the envelope carries fields only on validation_error", () => {
    const ctx = { instance: "/api/v1/assets", request_id: "r1" };
    expect(errorBody("not_found", "gone", ctx)).toEqual({
      error: { type: "not_found", title: "Not found", status: 404, detail: "gone", instance: "/api/v1/assets", request_id: "r1" },
    });
    const fields = [{ field: "name", code: "required" as const, message: "name is required" }];
    expect(toErrorEnvelope(new ValidationError(fields), ctx).error).toMatchObject({ type: "validation_error", status: 400, fields });
  });

  it("detail repeats the first message and counts the rest", () => {
    const f = (message: string) => ({ field: "x", code: "invalid_value" as const, message });
    expect(validationDetail([f("a")])).toBe("a");
    expect(validationDetail([f("a"), f("b")])).toBe("a (and 1 more validation error)");
    expect(validationDetail([f("a"), f("b"), f("c")])).toBe("a (and 2 more validation errors)");
  });

  it("unknown errors become internal_error with their text hidden", () => {
    const envelope = toErrorEnvelope(new Error("password=secret"), { instance: "/x", request_id: "r" });
    expect(envelope.error).toMatchObject({ type: "internal_error", status: 500, detail: "An unexpected error occurred" });
    expect(JSON.stringify(envelope)).not.toContain("secret");
  });

  it("503 carries Retry-After", () => {
    const err = serviceUnavailable("down", 2);
    expect(err).toBeInstanceOf(AppError);
    expect(err.status).toBe(503);
    expect(err.headers).toEqual({ "retry-after": "2" });
  });
});
