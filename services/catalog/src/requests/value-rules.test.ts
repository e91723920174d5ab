/** The value rules behind catalog bodies and filters (shared contracts), without I/O. */
import { describe, expect, it } from "vitest";
import { containsPattern, externalKeyProblem, parseInstant, sameInstant, SENTINEL_INSTANTS, toMicrosText } from "@whereabouts/shared";
import { jsonEqual } from "./body-parse.ts";
import { tagsEqual } from "./read-only-echo.ts";

describe("parseInstant / toMicrosText", () => {
  const micros = (text: string) => {
    const instant = parseInstant(text);
    return instant && toMicrosText(instant);
  };

  it("converts offsets to UTC and truncates beyond microseconds toward zero", () => {
    expect(micros("2026-11-20T10:15:00.2509999+01:00")).toBe("2026-11-20T09:15:00.250999Z");
    expect(micros("2026-11-20T23:30:00-01:00")).toBe("2026-11-21T00:30:00.000000Z");
    expect(micros("2024-02-29T00:00:00Z")).toBe("2024-02-29T00:00:00.000000Z");
    expect(micros("1969-12-31T23:59:59.999999999Z")).toBe("1969-12-31T23:59:59.999999Z");
    expect(micros("0001-01-01T00:00:00.5Z")).toBe("0001-01-01T00:00:00.500000Z");
    expect(micros("9999-12-31T23:59:59Z")).toBe("9999-12-31T23:59:59.000000Z");
  });

  it("rejects what is not an RFC 3339 date-time or falls outside years 1..9999", () => {
    for (const bad of [
      "2026-11-20",
      "2026/11/20T00:00:00Z",
      "2026-11-20T00:00:00",
      "2026-11-20 00:00:00Z",
      "2026-13-01T00:00:00Z",
      "2023-02-29T00:00:00Z",
      "2026-01-01T24:00:00Z",
      "2026-01-01T00:60:00Z",
      "2026-01-01T00:00:00+24:00",
      "2026-01-01T00:00:00.Z",
      " 2026-01-01T00:00:00Z",
      "",
    ]) {
      expect(parseInstant(bad), bad).toBeUndefined();
    }
    expect(micros("0001-01-01T00:00:00+00:01")).toBeUndefined();
    expect(micros("9999-12-31T23:59:59-00:01")).toBeUndefined();
  });

  it("recognizes both sentinels in any offset form, and not their neighbours", () => {
    const isSentinel = (text: string) => SENTINEL_INSTANTS.some((s) => sameInstant(s, parseInstant(text)!));
    expect(isSentinel("0001-01-01T00:00:00Z")).toBe(true);
    expect(isSentinel("0001-01-01T02:00:00.000000000+02:00")).toBe(true);
    expect(isSentinel("1970-01-01T00:00:00Z")).toBe(true);
    expect(isSentinel("1969-12-31T23:00:00-01:00")).toBe(true);
    expect(isSentinel("1970-01-01T00:00:00.000000001Z")).toBe(false);
    expect(isSentinel("0001-01-01T00:00:01Z")).toBe(false);
  });
});

describe("externalKeyProblem", () => {
  it("gives too_short, too_long and invalid_value in that order of precedence", () => {
    expect(externalKeyProblem("k", "ABC-123-xyz")).toBeUndefined();
    expect(externalKeyProblem("k", "")?.code).toBe("too_short");
    expect(externalKeyProblem("k", "   ")?.code).toBe("too_short");
    expect(externalKeyProblem("k", "a".repeat(256))?.code).toBe("too_long");
    expect(externalKeyProblem("k", "a".repeat(255))).toBeUndefined();
    for (const bad of ["a.b", "a_b", "a b", "a/b", "a:b", "a,b", "ü"]) expect(externalKeyProblem("k", bad)?.code).toBe("invalid_value");
  });
});

describe("helpers", () => {
  it("escapes LIKE wildcards in q", () => {
    expect(containsPattern("50%_off\\")).toBe("%50\\%\\_off\\\\%");
  });

  it("compares JSON regardless of key order", () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
  });

  it("matches echoed tags by the keys they carry, instants as instants", () => {
    const tag = {
      id: 7,
      tag_type: "rfid",
      value: "v",
      is_active: true,
      valid_from: "2026-01-01T00:00:00.000Z",
      valid_to: null,
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-01-01T00:00:00.000Z",
    };
    expect(tagsEqual([tag], [tag])).toBe(true);
    expect(tagsEqual([{ tag_type: "rfid", value: "v", created_at: "2026-01-01T01:00:00+01:00" }], [tag])).toBe(true);
    expect(tagsEqual([{ tag_type: "rfid", value: "w" }], [tag])).toBe(false);
    expect(tagsEqual([], [tag])).toBe(false);
    expect(tagsEqual([{ id: 7, colour: "red" }], [tag])).toBe(false);
  });
});
