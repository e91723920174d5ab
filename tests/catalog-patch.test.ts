/** PATCH body rules 1-10 and the paired-key matrix, for assets and locations. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { placeAsset, startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let orgId: number;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_patch", services: ["catalog"] });
  const tenant = await stack.tenant("Patch Org");
  orgId = tenant.orgId;
  api = apiClient(stack, tenant.auth);
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let counter = 0;
const key = (prefix = "P") => `${prefix}-${Date.now().toString(36)}-${++counter}`;

async function post(path: string, body: Body) {
  const res = await api<Body>("POST", path, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}
const asset = (body: Body = {}) => post("/api/v1/assets", { name: "asset", ...body });
const location = (body: Body = {}) => post("/api/v1/locations", { name: "location", ...body });
const patchAsset = (id: number, body: unknown) => api<Body>("PATCH", `/api/v1/assets/${id}`, body);
const patchLocation = (id: number, body: unknown) => api<Body>("PATCH", `/api/v1/locations/${id}`, body);
const fields = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);

/** Places an asset at a location as tracking would: an asset.moved event on TRACKING. */
async function place(assetId: number, locationId: number, seq: number) {
  const observedAt = new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString();
  await placeAsset(stack.nc, { orgId, assetId, locationId, seq, observedAt });
  const res = await api<Body>("GET", `/api/v1/assets/${assetId}`);
  expect(res.body.data.location_id).toBe(locationId);
  return res.body.data;
}

describe("rule 1-3: merge patch semantics", () => {
  it("sets present fields, clears writable-nullable ones with null, leaves omitted fields", async () => {
    const a = await asset({ description: "d", metadata: { x: 1 }, valid_to: "2999-01-01T00:00:00Z" });
    const res = await patchAsset(a.id, { name: "renamed", description: null, valid_to: null, metadata: { y: 2 } });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ name: "renamed", description: null, valid_to: null, metadata: { y: 2 }, is_active: true });
    expect(res.body.data.updated_at > a.updated_at).toBe(true);
    const cleared = await patchAsset(a.id, { metadata: {} });
    expect(cleared.body.data.metadata).toEqual({});
  });

  it("rejects null on non-nullable fields with invalid_value and empty strings with too_short", async () => {
    const a = await asset();
    for (const field of ["name", "is_active", "metadata", "valid_from"]) {
      const res = await patchAsset(a.id, { [field]: null });
      expect(fields(res), field).toEqual([[field, "invalid_value"]]);
    }
    expect(fields(await patchAsset(a.id, { name: "" }))).toEqual([["name", "too_short"]]);
    expect(fields(await patchAsset(a.id, { description: "" }))).toEqual([["description", "too_short"]]);
    const l = await location();
    for (const field of ["name", "is_active", "valid_from"]) {
      expect(fields(await patchLocation(l.id, { [field]: null })), field).toEqual([[field, "invalid_value"]]);
    }
    expect(fields(await patchLocation(l.id, { metadata: {} }))).toEqual([["metadata", "unknown_field"]]);
  });

  it("answers {} and no-op bodies with 200 and the record unchanged, updated_at included", async () => {
    const a = await asset({ description: "d", metadata: { b: 1, a: [1, 2] }, valid_from: "2020-01-01T00:00:00.123456Z" });
    const empty = await patchAsset(a.id, {});
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual(a);
    const same = await patchAsset(a.id, {
      name: a.name,
      description: "d",
      is_active: true,
      metadata: { a: [1, 2], b: 1 },
      valid_from: "2020-01-01T02:00:00.123456+02:00",
      valid_to: null,
    });
    expect(same.status).toBe(200);
    expect(same.body.data.updated_at).toBe(a.updated_at);
    // Microseconds count: a different µs is a change although the wire shows ms.
    const micro = await patchAsset(a.id, { valid_from: "2020-01-01T00:00:00.123457Z" });
    expect(micro.body.data.updated_at > a.updated_at).toBe(true);
    const l = await location({ description: "x" });
    const sameLocation = await patchLocation(l.id, { name: l.name, description: "x", parent_id: null, parent_external_key: null });
    expect(sameLocation.body.data).toEqual(l);
  });

  it("rejects a top-level null (gateway) and a non-object body", async () => {
    const a = await asset();
    const nul = await patchAsset(a.id, "null");
    expect(nul.body.error).toMatchObject({ type: "bad_request", detail: "Request body must be a JSON object (RFC 7396)" });
    const array = await patchAsset(a.id, "[]");
    expect(array.body.error.type).toBe("bad_request");
  });

  it("rejects unknown fields and wrong JSON types", async () => {
    const a = await asset();
    expect(fields(await patchAsset(a.id, { colour: "red" }))).toEqual([["colour", "unknown_field"]]);
    const wrong = await patchAsset(a.id, { is_active: "yes" });
    expect(wrong.body.error.type).toBe("bad_request");
    expect(wrong.body.error.detail).toContain("is_active");
  });
});

describe("rules 5-6: read-only echoes", () => {
  it("accepts echoes equal to the current state (instants compared as instants)", async () => {
    const a = await asset({ tags: [{ tag_type: "rfid", value: key("T") }] });
    const created = new Date(a.created_at);
    const offsetForm = new Date(created.getTime() + 2 * 3600_000).toISOString().replace("Z", "+02:00").replace(/\.(\d{3})/, ".$1000");
    const res = await patchAsset(a.id, {
      ...a,
      created_at: offsetForm,
      name: "echo",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.name).toBe("echo");
    // A full GET body echoed back unchanged is a no-op.
    const again = await patchAsset(a.id, res.body.data);
    expect(again.body.data.updated_at).toBe(res.body.data.updated_at);
  });

  it("rejects differing read-only values with read_only naming the write path", async () => {
    const a = await asset({ external_key: key("RO") });
    const cases: Array<[string, unknown, string]> = [
      ["id", a.id + 1, "server-managed"],
      ["created_at", "2001-01-01T00:00:00Z", "server-managed"],
      ["updated_at", "2001-01-01T00:00:00Z", "server-managed"],
      ["deleted_at", "2001-01-01T00:00:00Z", `DELETE /api/v1/assets/${a.id}`],
      ["external_key", key("NEW"), `/api/v1/assets/${a.id}/rename`],
      ["tags", [{ tag_type: "rfid", value: "NOPE" }], `/api/v1/assets/${a.id}/tags`],
      ["location_id", 12345, "scan event ingestion"],
      ["location_external_key", "DOCK-1", "scan event ingestion"],
    ];
    for (const [field, value, path] of cases) {
      const res = await patchAsset(a.id, { [field]: value });
      expect(fields(res), field).toEqual([[field, "read_only"]]);
      expect(res.body.error.fields[0].message, field).toContain(path);
    }
    const l = await location();
    const loc = await patchLocation(l.id, { external_key: key("X"), deleted_at: "2001-01-01T00:00:00Z", name: "" });
    expect(fields(loc)).toEqual([
      ["name", "too_short"],
      ["external_key", "read_only"],
      ["deleted_at", "read_only"],
    ]);
    expect(loc.body.error.detail).toContain("(and 2 more validation errors)");
    expect(loc.body.error.fields[1].message).toContain(`/api/v1/locations/${l.id}/rename`);
  });

  it("accepts deleted_at null on a live row and rejects nulls on non-nullable read-only fields", async () => {
    const a = await asset();
    expect((await patchAsset(a.id, { deleted_at: null })).status).toBe(200);
    expect(fields(await patchAsset(a.id, { id: null }))).toEqual([["id", "invalid_value"]]);
    expect(fields(await patchAsset(a.id, { created_at: "yesterday" }))).toEqual([["created_at", "invalid_value"]]);
  });
});

describe("asset location pair on PATCH", () => {
  it("accepts the current position (or null when unplaced) and rejects each differing form", async () => {
    const dock = await location({ external_key: key("DOCK") });
    const yard = await location({ external_key: key("YARD") });
    const a = await asset();
    expect((await patchAsset(a.id, { location_id: null, location_external_key: null })).status).toBe(200);
    expect(fields(await patchAsset(a.id, { location_id: dock.id }))).toEqual([["location_id", "read_only"]]);
    const placed = await place(a.id, dock.id, 1);
    expect(placed.location_external_key).toBe(dock.external_key);
    const agree = await patchAsset(a.id, { location_id: dock.id, location_external_key: dock.external_key, name: "moved" });
    expect(agree.status).toBe(200);
    expect(fields(await patchAsset(a.id, { location_id: null }))).toEqual([["location_id", "read_only"]]);
    const differ = await patchAsset(a.id, { location_id: yard.id, location_external_key: yard.external_key });
    expect(fields(differ)).toEqual([
      ["location_id", "read_only"],
      ["location_external_key", "read_only"],
    ]);
    const half = await patchAsset(a.id, { location_id: dock.id, location_external_key: yard.external_key });
    expect(fields(half)).toEqual([["location_external_key", "read_only"]]);
    expect(fields(await patchAsset(a.id, { location_external_key: "a.b" }))).toEqual([["location_external_key", "invalid_value"]]);
  });
});

describe("rules 7-8: location re-parenting", () => {
  it("re-parents by either form, both agreeing, and detaches with null", async () => {
    const a = await location({ external_key: key("PA") });
    const b = await location({ external_key: key("PB") });
    const child = await location({ parent_id: a.id });
    const byKey = await patchLocation(child.id, { parent_external_key: b.external_key });
    expect(byKey.body.data).toMatchObject({ parent_id: b.id, parent_external_key: b.external_key });
    const both = await patchLocation(child.id, { parent_id: a.id, parent_external_key: a.external_key });
    expect(both.body.data).toMatchObject({ parent_id: a.id, parent_external_key: a.external_key });
    const detach = await patchLocation(child.id, { parent_id: null });
    expect(detach.body.data).toMatchObject({ parent_id: null, parent_external_key: null });
    const detachKey = await patchLocation(child.id, { parent_external_key: b.external_key });
    expect(detachKey.body.data.parent_id).toBe(b.id);
    expect((await patchLocation(child.id, { parent_external_key: null })).body.data.parent_id).toBeNull();
  });

  it("answers ambiguous_fields when both forms differ", async () => {
    const a = await location({ external_key: key("AA") });
    const b = await location({ external_key: key("AB") });
    const child = await location();
    expect(fields(await patchLocation(child.id, { parent_id: a.id, parent_external_key: b.external_key }))).toEqual([
      ["parent_id", "ambiguous_fields"],
      ["parent_external_key", "ambiguous_fields"],
    ]);
    expect(fields(await patchLocation(child.id, { parent_id: a.id, parent_external_key: null }))).toEqual([
      ["parent_id", "ambiguous_fields"],
      ["parent_external_key", "ambiguous_fields"],
    ]);
  });

  it("answers fk_not_found naming the form sent, for missing and soft-deleted parents, after the read-only step", async () => {
    const child = await location();
    expect(fields(await patchLocation(child.id, { parent_id: 2147483000 }))).toEqual([["parent_id", "fk_not_found"]]);
    expect(fields(await patchLocation(child.id, { parent_external_key: key("NONE") }))).toEqual([
      ["parent_external_key", "fk_not_found"],
    ]);
    const gone = await location({ external_key: key("GONE") });
    await api("DELETE", `/api/v1/locations/${gone.id}`);
    expect(fields(await patchLocation(child.id, { parent_id: gone.id }))).toEqual([["parent_id", "fk_not_found"]]);
    expect(fields(await patchLocation(child.id, { parent_external_key: gone.external_key }))).toEqual([
      ["parent_external_key", "fk_not_found"],
    ]);
    // Read-only mismatches come first; the reference is not checked then.
    expect(fields(await patchLocation(child.id, { parent_id: 2147483000, id: child.id + 1 }))).toEqual([["id", "read_only"]]);
  });

  it("refuses cycles with invalid_value on the parent field sent", async () => {
    const top = await location({ external_key: key("TOP") });
    const mid = await location({ parent_id: top.id });
    const leaf = await location({ parent_id: mid.id, external_key: key("LEAF") });
    expect(fields(await patchLocation(top.id, { parent_id: leaf.id }))).toEqual([["parent_id", "invalid_value"]]);
    expect(fields(await patchLocation(top.id, { parent_external_key: leaf.external_key }))).toEqual([
      ["parent_external_key", "invalid_value"],
    ]);
    expect(fields(await patchLocation(top.id, { parent_id: top.id }))).toEqual([["parent_id", "invalid_value"]]);
    // Moving a node under a sibling subtree is fine.
    const other = await location();
    expect((await patchLocation(mid.id, { parent_id: other.id })).status).toBe(200);
  });

  it("on POST, both parent forms are ambiguous even when they agree; one form is fk-checked", async () => {
    const p = await location({ external_key: key("PP") });
    const both = await api<Body>("POST", "/api/v1/locations", { name: "x", parent_id: p.id, parent_external_key: p.external_key });
    expect(fields(both)).toEqual([
      ["parent_id", "ambiguous_fields"],
      ["parent_external_key", "ambiguous_fields"],
    ]);
    const nulls = await api<Body>("POST", "/api/v1/locations", { name: "x", parent_id: null, parent_external_key: null });
    expect(nulls.status).toBe(400);
    const missing = await api<Body>("POST", "/api/v1/locations", { name: "x", parent_external_key: key("MISSING") });
    expect(fields(missing)).toEqual([["parent_external_key", "fk_not_found"]]);
    expect((await location({ parent_id: null })).parent_id).toBeNull();
  });
});

describe("validity windows on PATCH", () => {
  it("moves a row out of and back into the currently-effective set", async () => {
    const k = key("WIN");
    const a = await asset({ external_key: k });
    const listed = async () => (await api<Body>("GET", `/api/v1/assets?external_key=${k}`)).body.data.length;
    expect(await listed()).toBe(1);
    await patchAsset(a.id, { valid_to: "2001-01-01T00:00:00Z" });
    expect(await listed()).toBe(0);
    await patchAsset(a.id, { valid_to: null, valid_from: "2999-01-01T00:00:00Z" });
    expect(await listed()).toBe(0);
    await patchAsset(a.id, { valid_from: "2001-01-01T00:00:00Z" });
    expect(await listed()).toBe(1);
    const sentinel = await patchAsset(a.id, { valid_to: "1970-01-01T00:00:00+00:00" });
    expect(fields(sentinel)).toEqual([["valid_to", "invalid_value"]]);
    expect(sentinel.body.error.detail).toContain("null");
  });

  it("changes is_active and advances updated_at only on a real change", async () => {
    const l = await location();
    const off = await patchLocation(l.id, { is_active: false });
    expect(off.body.data.is_active).toBe(false);
    expect(off.body.data.updated_at > l.updated_at).toBe(true);
    const again = await patchLocation(l.id, { is_active: false });
    expect(again.body.data.updated_at).toBe(off.body.data.updated_at);
  });
});
