/**
 * Every invalid parameter of GET /api/v1/reports/asset-locations gets the
 * spec's 400 validation_error with the right fields[].field and code; the
 * error envelope is complete.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
let auth: Record<string, string>;

beforeAll(async () => {
  stack = await startStack({ label: "reporting_validation", services: ["reporting"] });
  ({ auth } = await stack.tenant("Validation"));
});
afterAll(async () => stack?.close());

const URL_BASE = "/api/v1/reports/asset-locations";

async function get(query: string, method: "GET" | "HEAD" = "GET") {
  return stack.gateway.inject({ method, url: `${URL_BASE}?${query}`, headers: auth });
}

interface Field {
  field: string;
  code: string;
  message: string;
  params?: Record<string, unknown>;
}

async function fieldsOf(query: string): Promise<Field[]> {
  const res = await get(query);
  expect(res.statusCode, `${query} -> ${res.body}`).toBe(400);
  const error = res.json().error;
  expect(error.type).toBe("validation_error");
  return error.fields;
}

async function expectField(query: string, field: string, code: string) {
  const fields = await fieldsOf(query);
  expect(fields, query).toEqual([expect.objectContaining({ field, code })]);
  return fields[0]!;
}

const long = "A".repeat(256);

describe("query keys", () => {
  it("rejects is_active (not a filter of the report) with unknown_field", async () => {
    await expectField("is_active=true", "is_active", "unknown_field");
    await expectField("is_active=false", "is_active", "unknown_field");
  });

  it("rejects undeclared keys, the asset list's filters included", async () => {
    await expectField("external_key=A-1", "external_key", "unknown_field");
    await expectField("bogus=1", "bogus", "unknown_field");
  });

  it("renders the full error envelope", async () => {
    const res = await get("is_active=true");
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const error = res.json().error;
    expect(error).toMatchObject({ type: "validation_error", title: "Validation failed", status: 400, instance: URL_BASE });
    expect(error.request_id).toBe(res.headers["x-request-id"]);
    expect(error.detail).toBe(error.fields[0].message);
  });

  it("lists every problem at once; detail counts the rest", async () => {
    const res = await get("is_active=true&limit=500&asset_id=0");
    const error = res.json().error;
    expect(error.fields.map((f: Field) => `${f.field}:${f.code}`).sort()).toEqual(
      ["asset_id:too_small", "is_active:unknown_field", "limit:too_large"].sort(),
    );
    expect(error.detail).toMatch(/\(and 2 more validation errors\)$/);
  });

  it("HEAD gets the same status, without a body", async () => {
    const res = await get("is_active=true", "HEAD");
    expect(res.statusCode).toBe(400);
    expect(res.body).toBe("");
  });
});

describe("id filters", () => {
  for (const name of ["asset_id", "location_id"]) {
    it(`${name}: integers in 1..2147483647`, async () => {
      await expectField(`${name}=abc`, name, "invalid_value");
      await expectField(`${name}=1.5`, name, "invalid_value");
      await expectField(`${name}=`, name, "invalid_value");
      await expectField(`${name}=1,2`, name, "invalid_value");
      await expectField(`${name}=0`, name, "too_small");
      await expectField(`${name}=-3`, name, "too_small");
      const tooLarge = await expectField(`${name}=2147483648`, name, "too_large");
      expect(tooLarge.params).toMatchObject({ max: 2147483647 });
      expect((await get(`${name}=2147483647`)).statusCode).toBe(200);
      // Each bad repeat is reported; good ones beside it do not hide it.
      const fields = await fieldsOf(`${name}=1&${name}=x&${name}=0`);
      expect(fields.map((f) => f.code)).toEqual(["invalid_value", "too_small"]);
    });
  }
});

describe("external_key filters", () => {
  for (const name of ["asset_external_key", "location_external_key"]) {
    it(`${name}: the external_key rules`, async () => {
      for (const bad of ["A,B", "a.b", "a_b", "a b", "a/b", "a:b", "Ä-1", "a%25b"]) {
        await expectField(`${name}=${encodeURIComponent(bad)}`, name, "invalid_value");
      }
      const short = await expectField(`${name}=`, name, "too_short");
      expect(short.params).toMatchObject({ min_length: 1 });
      await expectField(`${name}=%20%20`, name, "too_short");
      const tooLong = await expectField(`${name}=${long}`, name, "too_long");
      expect(tooLong.params).toMatchObject({ max_length: 255 });
      expect((await get(`${name}=${"A".repeat(255)}`)).statusCode).toBe(200);
      expect((await get(`${name}=Aa-09`)).statusCode).toBe(200);
    });
  }
});

describe("paired filters", () => {
  it("both forms of the location pair: ambiguous_fields, one entry per parameter", async () => {
    const fields = await fieldsOf("location_id=1&location_external_key=DOCK-1");
    expect(fields).toEqual([
      expect.objectContaining({ field: "location_id", code: "ambiguous_fields" }),
      expect.objectContaining({ field: "location_external_key", code: "ambiguous_fields" }),
    ]);
  });

  it("both forms of the asset pair: ambiguous_fields, one entry per parameter", async () => {
    const fields = await fieldsOf("asset_external_key=A-1&asset_id=1&asset_id=2");
    expect(fields).toEqual([
      expect.objectContaining({ field: "asset_id", code: "ambiguous_fields" }),
      expect.objectContaining({ field: "asset_external_key", code: "ambiguous_fields" }),
    ]);
  });

  it("both pairs doubled: four entries; one form of each pair is fine", async () => {
    const fields = await fieldsOf("location_id=1&location_external_key=L&asset_id=1&asset_external_key=A");
    expect(fields.map((f) => f.field).sort()).toEqual(
      ["asset_external_key", "asset_id", "location_external_key", "location_id"].sort(),
    );
    expect(fields.every((f) => f.code === "ambiguous_fields")).toBe(true);
    expect((await get("location_id=1&asset_external_key=A-1")).statusCode).toBe(200);
    expect((await get("location_external_key=L-1&asset_id=1")).statusCode).toBe(200);
  });
});

describe("include_deleted, q, sort, limit, offset", () => {
  it("include_deleted: true or false only, once", async () => {
    for (const bad of ["yes", "TRUE", "1", "0", ""]) {
      await expectField(`include_deleted=${bad}`, "include_deleted", "invalid_value");
    }
    await expectField("include_deleted=true&include_deleted=false", "include_deleted", "invalid_value");
    expect((await get("include_deleted=true")).statusCode).toBe(200);
  });

  it("q: any text, once", async () => {
    expect((await get(`q=${encodeURIComponent("a,b %_\\'\"")}`)).statusCode).toBe(200);
    expect((await get("q=")).statusCode).toBe(200);
    await expectField("q=a&q=b", "q", "invalid_value");
  });

  it("sort: unknown fields named in the message", async () => {
    const name = await expectField("sort=name", "sort", "invalid_value");
    expect(name.message).toBe("unknown sort field: name");
    expect((await expectField("sort=-external_key", "sort", "invalid_value")).message).toBe(
      "unknown sort field: external_key",
    );
    expect((await expectField("sort=asset_last_seen,is_active", "sort", "invalid_value")).message).toBe(
      "unknown sort field: is_active",
    );
    for (const good of ["asset_last_seen", "-asset_last_seen", "asset_external_key,-location_external_key"]) {
      expect((await get(`sort=${good}`)).statusCode, good).toBe(200);
    }
  });

  it("limit: 1..200, default 50; offset: 0 or more", async () => {
    const tooLarge = await expectField("limit=201", "limit", "too_large");
    expect(tooLarge.params).toMatchObject({ max: 200 });
    await expectField("limit=0", "limit", "too_small");
    await expectField("limit=ten", "limit", "invalid_value");
    await expectField("offset=-1", "offset", "too_small");
    await expectField("offset=x", "offset", "invalid_value");
    const ok = await get("limit=200&offset=3");
    expect(ok.json()).toMatchObject({ limit: 200, offset: 3, data: [], total_count: 0 });
  });
});

describe("scope", () => {
  it("needs reports:read", async () => {
    const org = await stack.createOrg("No reports");
    const { key } = await stack.createKey({ org: org.id, scopes: "assets:read" });
    const res = await stack.gateway.inject({ method: "GET", url: URL_BASE, headers: { authorization: `Bearer ${key}` } });
    expect(res.statusCode).toBe(403);
  });
});
