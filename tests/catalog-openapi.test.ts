/** docs/openapi.json: generated from the shared contracts, up to date, OpenAPI 3.0.3 rules. */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { OPENAPI_FILE, renderOpenApi } from "../scripts/openapi.ts";
import { createOpenApiValidator } from "./openapi-validator.ts";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const committed = readFileSync(OPENAPI_FILE, "utf8");
const doc = JSON.parse(committed) as Json;

const SPEC_OPERATIONS: Array<[string, string[]]> = [
  ["/api/v1/orgs/me", ["get"]],
  ["/api/v1/assets", ["get", "post"]],
  ["/api/v1/assets/{asset_id}", ["get", "patch", "delete"]],
  ["/api/v1/assets/{asset_id}/rename", ["post"]],
  ["/api/v1/assets/{asset_id}/tags", ["post"]],
  ["/api/v1/assets/{asset_id}/tags/{tag_id}", ["delete"]],
  ["/api/v1/assets/{asset_id}/history", ["get"]],
  ["/api/v1/locations", ["get", "post"]],
  ["/api/v1/locations/{location_id}", ["get", "patch", "delete"]],
  ["/api/v1/locations/{location_id}/rename", ["post"]],
  ["/api/v1/locations/{location_id}/tags", ["post"]],
  ["/api/v1/locations/{location_id}/tags/{tag_id}", ["delete"]],
  ["/api/v1/locations/{location_id}/ancestors", ["get"]],
  ["/api/v1/locations/{location_id}/children", ["get"]],
  ["/api/v1/locations/{location_id}/descendants", ["get"]],
  ["/api/v1/reports/asset-locations", ["get"]],
];

describe("docs/openapi.json", () => {
  it("is up to date with the shared contracts (run: npx tsx scripts/openapi.ts)", () => {
    expect(path.relative(path.dirname(fileURLToPath(import.meta.url)), OPENAPI_FILE)).toBe(path.join("..", "docs", "openapi.json"));
    expect(committed).toBe(renderOpenApi());
  });

  it("is OpenAPI 3.0.3 with every path and method of the spec, and no HEAD", () => {
    expect(doc.openapi).toBe("3.0.3");
    for (const [p, methods] of SPEC_OPERATIONS) {
      expect(Object.keys(doc.paths[p] ?? {}).sort(), p).toEqual([...methods].sort());
    }
    expect(committed).not.toMatch(/"head"\s*:/);
  });

  it("marks nullable fields with nullable: true and requires every field of the records", () => {
    const schemas = doc.components.schemas;
    for (const [name, nullable] of [
      ["AssetView", ["description", "valid_to", "location_id", "location_external_key", "deleted_at"]],
      ["LocationView", ["description", "parent_id", "parent_external_key", "max_dwell_s", "valid_to", "deleted_at"]],
      ["TagView", ["valid_to"]],
      ["AssetHistoryItem", ["location_id", "location_external_key", "duration_seconds"]],
      ["AssetLocationItem", ["location_id", "location_external_key", "asset_deleted_at"]],
    ] as const) {
      const schema = schemas[name];
      expect(schema.required.sort(), name).toEqual(Object.keys(schema.properties).sort());
      for (const [field, property] of Object.entries<Json>(schema.properties)) {
        expect(property.nullable === true, `${name}.${field}`).toBe((nullable as readonly string[]).includes(field));
      }
    }
    expect(JSON.stringify(doc)).not.toMatch(/"type":\s*\[/);
    expect(JSON.stringify(doc)).not.toContain('"$id"');
  });

  it("declares the error envelope on error statuses and the Location header on creates", () => {
    for (const [p, methods] of SPEC_OPERATIONS) {
      for (const method of methods) {
        const responses = doc.paths[p][method].responses as Json;
        for (const status of ["401", "403", "429", "500"]) {
          expect(responses[status]?.content["application/json"].schema, `${method} ${p} ${status}`).toEqual({
            $ref: "#/components/schemas/ErrorEnvelope",
          });
        }
      }
    }
    expect(doc.paths["/api/v1/assets"].post.responses["201"].headers.Location).toBeDefined();
    expect(doc.paths["/api/v1/locations/{location_id}/tags"].post.responses["201"].headers.Location).toBeDefined();
    expect(doc.paths["/api/v1/assets/{asset_id}"].patch.requestBody.content["application/merge-patch+json"]).toBeDefined();
  });

  it("validates bodies: the validator rejects a record with a missing or mistyped field", () => {
    const validator = createOpenApiValidator();
    const tag = {
      id: 1,
      tag_type: "rfid",
      value: "v",
      is_active: true,
      valid_from: "2026-01-01T00:00:00.000Z",
      valid_to: null,
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-01-01T00:00:00.000Z",
    };
    expect(validator.check("POST", "/api/v1/assets/1/tags", 201, { data: tag })).toEqual([]);
    expect(validator.check("POST", "/api/v1/assets/1/tags", 201, { data: { ...tag, valid_to: undefined } })).not.toEqual([]);
    expect(validator.check("POST", "/api/v1/assets/1/tags", 201, { data: { ...tag, id: "1" } })).not.toEqual([]);
    expect(validator.check("DELETE", "/api/v1/assets/1/tags/1", 204, undefined)).toEqual([]);
    expect(validator.check("GET", "/api/v1/assets/1/tags", 200, {})).not.toEqual([]);
  });
});
