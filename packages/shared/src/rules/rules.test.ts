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

  it("parses as the RFC 3339 grammar reads, on valid instants and on every kind of near miss", () => {
    // The grammar as a regular expression (the parser's first form), and the calendar checks after it.
    const GRAMMAR = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
    const reference = (text: string, maxFractionDigits?: number) => {
      const m = GRAMMAR.exec(text);
      if (!m) return undefined;
      if (maxFractionDigits !== undefined && (m[7]?.length ?? 0) > maxFractionDigits) return undefined;
      const [y, mo, d, h, mi, s] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
      const back = new Date(0); // Date.UTC would read years below 100 as 19xx
      back.setUTCFullYear(y!, mo! - 1, d!);
      back.setUTCHours(h!, mi!, s!, 0);
      const ms = back.getTime();
      if (mo! < 1 || mo! > 12 || back.getUTCDate() !== d || back.getUTCMonth() !== mo! - 1 || h! > 23 || mi! > 59 || s! > 59) return undefined;
      const offset = m[8] ? 0 : Number(m[10]) > 23 || Number(m[11]) > 59 ? Number.NaN : (m[9] === "-" ? -1 : 1) * (Number(m[10]) * 3600 + Number(m[11]) * 60);
      if (Number.isNaN(offset)) return undefined;
      return { seconds: Math.floor(ms / 1000) - offset, nanos: Number((m[7] ?? "").slice(0, 9).padEnd(9, "0")) };
    };
    const valid = ["2026-11-20T10:15:00Z", "2024-02-29t23:59:59.123456789z", "1969-12-31T23:59:59.5-03:30", "9999-12-31T23:59:59.1234567891+14:00", "0001-01-01T00:00:00Z"];
    const chars = "0123456789-:.TtZz+ x";
    let seed = 20261128;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const cases = ["", "2026-11-20", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-20T24:00:00Z", "2026-11-20T10:00:00+24:00", "2026-11-20T10:00:00.Z", "２026-11-20T10:00:00Z"];
    for (let i = 0; i < 20_000; i++) {
      let text = valid[random(valid.length)]!;
      for (let edits = 1 + random(2); edits > 0; edits--) {
        const at = random(text.length + 1);
        const kind = random(3);
        if (kind === 0) text = text.slice(0, at) + chars[random(chars.length)] + text.slice(at + 1);
        else if (kind === 1) text = text.slice(0, at) + text.slice(at + 1);
        else text = text.slice(0, at) + chars[random(chars.length)] + text.slice(at);
      }
      cases.push(text);
    }
    let accepted = 0;
    for (const text of [...valid, ...cases]) {
      expect(parseInstant(text), text).toEqual(reference(text));
      expect(parseInstant(text, { maxFractionDigits: 9 }), text).toEqual(reference(text, 9));
      if (reference(text)) accepted++;
    }
    // The mutations reach both sides of the grammar.
    expect(accepted).toBeGreaterThan(1000);
    expect(accepted).toBeLessThan(cases.length - 1000);
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
