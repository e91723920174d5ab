/** The iterative JSON checks: the raw-text scan (gateway) and the value walk (services) agree. */
import { describe, expect, it } from "vitest";
import { checkJsonValue, jsonProblemsError, scanJsonText } from "./json-guard.ts";
import { METADATA_MAX_DEPTH } from "./limits.ts";
import { ValidationError } from "./errors.ts";

const nestedText = (levels: number) => "[".repeat(levels) + "]".repeat(levels);

describe("scanJsonText / checkJsonValue", () => {
  it("allow METADATA_MAX_DEPTH levels in a member and refuse one more, naming the top-level key", () => {
    const ok = `{"metadata":${nestedText(METADATA_MAX_DEPTH)}}`;
    const deep = `{"name":"x","metadata":${nestedText(METADATA_MAX_DEPTH + 1)},"zzz":${nestedText(500_000)}}`;
    expect(scanJsonText(ok)).toEqual([]);
    expect(checkJsonValue(JSON.parse(ok))).toEqual([]);
    expect(scanJsonText(deep)).toEqual([
      { kind: "depth", field: "metadata" },
      { kind: "depth", field: "zzz" },
    ]);
    expect(checkJsonValue(JSON.parse(`{"metadata":${nestedText(METADATA_MAX_DEPTH + 1)}}`))).toEqual([{ kind: "depth", field: "metadata" }]);
    expect(scanJsonText(nestedText(100_000))).toEqual([{ kind: "depth", field: "" }]);
  });

  it("find lone surrogates in values and keys, escaped or raw, and let pairs be", () => {
    const text = String.raw`{"a":"\ud83d\ude00","b":["x","\ud800"],"c":{"\udc00k":1},"d":"\\ud800","e":"${"\ud800"}"}`;
    const problems = scanJsonText(text);
    expect(problems).toEqual([
      { kind: "lone_surrogate", field: "b[1]" },
      { kind: "lone_surrogate", field: "c.\ufffdk" },
      { kind: "lone_surrogate", field: "e" },
    ]);
    expect(checkJsonValue(JSON.parse(text)).map((p) => p.field).sort()).toEqual(["b[1]", "c.\ufffdk", "e"]);
  });

  it("find numbers beyond the double range, wherever they are", () => {
    expect(scanJsonText('{"a":1e308,"b":[0,-1e400],"c":{"d":1E+999},"e":"1e400"}')).toEqual([
      { kind: "non_finite", field: "b[1]" },
      { kind: "non_finite", field: "c.d" },
    ]);
    expect(scanJsonText(`{"n":${"9".repeat(400)}}`)).toEqual([{ kind: "non_finite", field: "n" }]);
    expect(checkJsonValue({ a: [Infinity] })).toEqual([{ kind: "non_finite", field: "a[0]" }]);
  });

  it("map to the spec's errors: bad_request for a number, invalid_value otherwise", () => {
    expect(jsonProblemsError([])).toBeUndefined();
    expect(jsonProblemsError([{ kind: "non_finite", field: "parent_id" }])).toMatchObject({ type: "bad_request" });
    const err = jsonProblemsError([{ kind: "depth", field: "metadata" }]);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).fields).toEqual([
      expect.objectContaining({ field: "metadata", code: "invalid_value", params: { max_depth: METADATA_MAX_DEPTH } }),
    ]);
    expect(jsonProblemsError([{ kind: "depth", field: "" }])).toMatchObject({ type: "bad_request" });
  });
});
