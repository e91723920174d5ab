import { describe, expect, it } from "vitest";
import { ValidationError } from "@whereabouts/shared";
import { parseReportQuery } from "./report-query.ts";

const fieldsOf = (query: Record<string, string[]>) => {
  try {
    parseReportQuery(query);
  } catch (err) {
    if (err instanceof ValidationError) return err.fields.map((f) => `${f.field}:${f.code}`);
    throw err;
  }
  return [];
};

describe("parseReportQuery", () => {
  it("defaults: -asset_last_seen, limit 50, offset 0, live rows only", () => {
    expect(parseReportQuery({})).toEqual({
      assetIds: [],
      assetExternalKeys: [],
      locationIds: [],
      locationExternalKeys: [],
      includeDeleted: false,
      q: undefined,
      sort: [{ field: "asset_last_seen", descending: true }],
      limit: 50,
      offset: 0,
    });
  });

  it("keeps repeats, never splits commas in q", () => {
    const parsed = parseReportQuery({ asset_id: ["3", "7"], location_external_key: ["A-1", "b-2"], q: ["x,y"] });
    expect(parsed).toMatchObject({ assetIds: [3, 7], locationExternalKeys: ["A-1", "b-2"], q: "x,y" });
  });

  it("reports each problem with its field and code", () => {
    expect(fieldsOf({ is_active: ["true"] })).toEqual(["is_active:unknown_field"]);
    expect(fieldsOf({ asset_external_key: ["a,b", "", "x".repeat(256)] })).toEqual([
      "asset_external_key:invalid_value",
      "asset_external_key:too_short",
      "asset_external_key:too_long",
    ]);
    expect(fieldsOf({ location_id: ["1"], location_external_key: ["K"] })).toEqual([
      "location_id:ambiguous_fields",
      "location_external_key:ambiguous_fields",
    ]);
    expect(fieldsOf({ sort: ["-nope"] })).toEqual(["sort:invalid_value"]);
  });
});
