import { describe, expect, it } from "vitest";
import { ValidationError } from "./errors.ts";
import { parsePathId, QueryReader } from "./validation.ts";

function fieldsOf(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err.fields;
    throw err;
  }
  throw new Error("did not throw");
}

describe("parsePathId", () => {
  it("accepts 1..2147483647", () => {
    expect(parsePathId("asset_id", "1")).toBe(1);
    expect(parsePathId("asset_id", "2147483647")).toBe(2147483647);
    expect(parsePathId("asset_id", "007")).toBe(7);
  });
  it.each([
    ["0", "too_small", { min: 1 }],
    ["-1", "too_small", { min: 1 }],
    ["2147483648", "too_large", { max: 2147483647 }],
    ["9".repeat(400), "too_large", { max: 2147483647 }],
    ["abc", "invalid_value", undefined],
    ["1.0", "invalid_value", undefined],
    ["+1", "invalid_value", undefined],
    ["", "invalid_value", undefined],
    ["١", "invalid_value", undefined],
  ])("%s → %s", (raw, code, params) => {
    const [field] = fieldsOf(() => parsePathId("tag_id", raw));
    expect(field).toMatchObject({ field: "tag_id", code });
    if (params) expect(field!.params).toMatchObject(params);
  });
});

describe("QueryReader", () => {
  it("reads the common list parameters and rejects unknown keys, listing every error", () => {
    const q = new QueryReader({ limit: ["201"], offset: ["-1"], sort: ["name,-bogus"], extra: ["1"], is_active: ["yes"] });
    q.page();
    q.sort(["name"], []);
    q.bool("is_active");
    const fields = fieldsOf(() => q.finish());
    expect(fields.map((f) => [f.field, f.code])).toEqual([
      ["limit", "too_large"],
      ["offset", "too_small"],
      ["sort", "invalid_value"],
      ["is_active", "invalid_value"],
      ["extra", "unknown_field"],
    ]);
    expect(fields[0]!.params).toEqual({ max: 200 });
    expect(fields[2]!.message).toBe("unknown sort field: bogus");
  });

  it("defaults limit 50 and offset 0; repeated values are 'any of'", () => {
    const q = new QueryReader({ asset_id: ["1", "2"] });
    expect(q.page()).toEqual({ limit: 50, offset: 0 });
    expect(q.ids("asset_id")).toEqual([1, 2]);
    expect(() => q.finish()).not.toThrow();
  });
});
