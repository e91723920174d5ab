/** The shared rules, without I/O (SQL fragments are exercised by the services' integration tests). */
import { describe, expect, it } from "vitest";
import { AppError } from "../errors.ts";
import { QueryReader } from "../validation.ts";
import { readKeyFilter } from "./external-key.ts";
import { epochMicros, formatMicros, parseInstant, parseRfc3339, toMicroPrecision, wireFromMicros } from "./instant.ts";
import { containsPattern, escapeLike } from "./like.ts";
import { isNewer } from "./newer-wins.ts";
import { requireOrg } from "./org-context.ts";
import { exclusivePair } from "./pair.ts";
import { listEnvelope, listEnvelopeJson } from "./paging.ts";

describe("instants", () => {
  it("epochMicros keeps microseconds and converts offsets", () => {
    expect(epochMicros("2026-11-20T10:00:00.000123Z") - epochMicros("2026-11-20T10:00:00Z")).toBe(123);
    expect(epochMicros("2026-11-20T12:00:00.5+02:00")).toBe(epochMicros("2026-11-20T10:00:00.500Z"));
    expect(epochMicros("1969-12-31T23:59:59.999999Z")).toBe(-1);
    expect(epochMicros("not a time")).toBeNaN();
  });

  it("toMicroPrecision truncates toward zero", () => {
    expect(toMicroPrecision("2026-11-20T10:00:00.1234569Z")).toBe("2026-11-20T10:00:00.123456Z");
    expect(toMicroPrecision("2026-11-20T10:00:00.12Z")).toBe("2026-11-20T10:00:00.12Z");
  });

  it("the bounded form refuses more than nine fractional digits; the body form accepts them", () => {
    expect(parseInstant("2026-11-20T10:15:00.1234567890Z")).toBeDefined();
    expect(parseInstant("2026-11-20T10:15:00.1234567890Z", { maxFractionDigits: 9 })).toBeUndefined();
    expect(parseRfc3339("2026-11-20T10:15:00.1234567890Z")).toBeNull();
    expect(parseRfc3339("2026-11-20T10:15:00.123456789Z")).toEqual({ ms: Date.parse("2026-11-20T10:15:00.123Z"), micros: 456 });
  });

  it("formats the stored form, also before the epoch", () => {
    expect(formatMicros(parseRfc3339("1969-12-31T23:59:59.000001Z")!)).toBe("1969-12-31T23:59:59.000001Z");
    expect(formatMicros(parseRfc3339("2026-11-20T12:00:00.5+02:00")!)).toBe("2026-11-20T10:00:00.500000Z");
  });

  it("writes the wire form from epoch microseconds, truncated to milliseconds", () => {
    expect(wireFromMicros(epochMicros("2026-11-20T10:00:00.123999Z"))).toBe("2026-11-20T10:00:00.123Z");
  });
});

describe("LIKE", () => {
  it("escapes the wildcards and the escape character", () => {
    expect(escapeLike("50%_a\\b")).toBe("50\\%\\_a\\\\b");
    expect(containsPattern("50%_off\\")).toBe("%50\\%\\_off\\\\%");
  });
});

describe("newer wins", () => {
  it("orders by instant, then seq; a tie is not newer", () => {
    expect(isNewer({ at: 10, seq: 5 }, { at: 11, seq: 1 })).toBe(true);
    expect(isNewer({ at: 10, seq: 5 }, { at: 10, seq: 6 })).toBe(true);
    expect(isNewer({ at: 10, seq: 5 }, { at: 10, seq: 5 })).toBe(false);
    expect(isNewer({ at: 10, seq: 5 }, { at: 9, seq: 9 })).toBe(false);
  });
});

describe("query rules", () => {
  const problems = (query: Record<string, string[]>, read: (r: QueryReader) => void) => {
    const reader = new QueryReader(query);
    read(reader);
    return reader.errors.map((e) => `${e.field}:${e.code}`);
  };

  it("external-key filters: commas, empty values and the pattern", () => {
    expect(problems({ k: ["A-1", "a,b", " ", "a.b"] }, (r) => readKeyFilter(r, "k"))).toEqual(["k:invalid_value", "k:too_short", "k:invalid_value"]);
    const reader = new QueryReader({ k: ["A-1", "B-2"] });
    expect(readKeyFilter(reader, "k")).toEqual(["A-1", "B-2"]);
  });

  it("a pair given together: one ambiguous_fields entry per parameter", () => {
    expect(problems({ a: ["1"], b: ["x"] }, (r) => exclusivePair(r, "a", "b"))).toEqual(["a:ambiguous_fields", "b:ambiguous_fields"]);
    expect(problems({ a: ["1"] }, (r) => exclusivePair(r, "a", "b"))).toEqual([]);
  });
});

describe("paging", () => {
  it("builds the same envelope as objects and as JSON text", () => {
    const page = { limit: 2, offset: 4 };
    expect(listEnvelope([1, 2], page, 9)).toEqual({ data: [1, 2], limit: 2, offset: 4, total_count: 9 });
    expect(JSON.parse(listEnvelopeJson(["1", "2"], page, 9).text)).toEqual({ data: [1, 2], limit: 2, offset: 4, total_count: 9 });
  });
});

describe("no organization", () => {
  const type = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err instanceof AppError ? err.type : "other";
    }
    return "none";
  };
  it("orgs/me answers 422 missing_org_context, everything else 403 forbidden", () => {
    expect(type(() => requireOrg({ org_id: null }, "orgs/me"))).toBe("missing_org_context");
    expect(type(() => requireOrg({ org_id: null }))).toBe("forbidden");
    expect(requireOrg({ org_id: 7 })).toBe(7);
  });
});
