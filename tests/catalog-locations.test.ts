/** Locations end to end: records, create, delete rules, rename, tree endpoints, isolation. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { placeAsset, startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let other: ApiCall;
let orgId: number;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_locations", services: ["catalog"] });
  const tenant = await stack.tenant("Locations Org");
  orgId = tenant.orgId;
  api = apiClient(stack, tenant.auth);
  other = apiClient(stack, (await stack.tenant("Elsewhere")).auth);
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const LOCATION_KEYS = [
  "id",
  "external_key",
  "name",
  "description",
  "is_active",
  "parent_id",
  "parent_external_key",
  "is_zone",
  "max_dwell_s",
  "valid_from",
  "valid_to",
  "created_at",
  "updated_at",
  "deleted_at",
  "tags",
];

let counter = 0;
const key = (prefix = "L") => `${prefix}-${Date.now().toString(36)}-${++counter}`;
const fields = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);

async function location(body: Body = {}, call = api) {
  const res = await call<Body>("POST", "/api/v1/locations", { name: "loc", ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}
async function asset(body: Body = {}) {
  const res = await api<Body>("POST", "/api/v1/assets", { name: "asset", ...body });
  expect(res.status).toBe(201);
  return res.body.data as Body;
}
const ids = (res: { body: Body }) => (res.body.data as Body[]).map((l) => l.id);

let seq = 0;
async function place(assetId: number, locationId: number) {
  seq++;
  const observedAt = new Date(Date.UTC(2026, 0, 1, 0, 0, 0, seq)).toISOString();
  await placeAsset(stack.nc, { orgId, assetId, locationId, seq, observedAt });
}

describe("location records and create", () => {
  it("returns every field with nulls, a Location header, and the parent pair", async () => {
    const parentKey = key("PARENT");
    const parent = await location({ external_key: parentKey, description: "top" });
    const res = await api<Body>("POST", "/api/v1/locations", { name: "Child", parent_external_key: parentKey, is_active: false });
    expect(res.status).toBe(201);
    expect(res.headers.location).toBe(`/api/v1/locations/${res.body.data.id}`);
    expect(Object.keys(res.body.data).sort()).toEqual([...LOCATION_KEYS].sort());
    expect(res.body.data).toMatchObject({
      name: "Child",
      parent_id: parent.id,
      parent_external_key: parentKey,
      is_active: false,
      description: null,
      valid_to: null,
      deleted_at: null,
      tags: [],
    });
    expect(parent).toMatchObject({ parent_id: null, parent_external_key: null, description: "top" });
    expect((await api<Body>("GET", `/api/v1/locations/${res.body.data.id}`)).body).toEqual({ data: res.body.data });
  });

  it("mints LOC-NNNN when the key is absent and rejects metadata as unknown_field", async () => {
    const fresh = apiClient(stack, (await stack.tenant("Loc Mint")).auth);
    expect((await location({}, fresh)).external_key).toBe("LOC-0001");
    expect((await location({}, fresh)).external_key).toBe("LOC-0002");
    const meta = await api<Body>("POST", "/api/v1/locations", { name: "x", metadata: {} });
    expect(fields(meta)).toEqual([["metadata", "unknown_field"]]);
    const missingName = await api<Body>("POST", "/api/v1/locations", {});
    expect(fields(missingName)).toEqual([["name", "required"]]);
  });

  it("keeps the parent key in the pair after a rename of the parent (joined at read time)", async () => {
    const parent = await location({ external_key: key("OLD") });
    const child = await location({ parent_id: parent.id });
    const newKey = key("NEW");
    await api("POST", `/api/v1/locations/${parent.id}/rename`, { external_key: newKey });
    expect((await api<Body>("GET", `/api/v1/locations/${child.id}`)).body.data.parent_external_key).toBe(newKey);
  });

  it("answers 409 on a live duplicate key; reusable after delete", async () => {
    const k = key("DUP");
    const first = await location({ external_key: k });
    expect((await api("POST", "/api/v1/locations", { name: "x", external_key: k })).status).toBe(409);
    expect((await api("DELETE", `/api/v1/locations/${first.id}`)).status).toBe(204);
    await location({ external_key: k });
  });
});

describe("location delete", () => {
  it("is blocked by live descendant locations first, then by live placed assets", async () => {
    const site = await location();
    const room = await location({ parent_id: site.id });
    const a = await asset();
    await place(a.id, site.id);
    const blocked = await api<Body>("DELETE", `/api/v1/locations/${site.id}`);
    expect(blocked.status).toBe(409);
    expect(blocked.body.error.type).toBe("conflict");
    expect(blocked.body.error.detail).toMatch(/descendant locations/);
    expect(blocked.body.error.detail).toMatch(/cascade/);
    // The child goes (soft-deleted children no longer block) ...
    expect((await api("DELETE", `/api/v1/locations/${room.id}`)).status).toBe(204);
    const assets = await api<Body>("DELETE", `/api/v1/locations/${site.id}`);
    expect(assets.status).toBe(409);
    expect(assets.body.error.detail).toMatch(/assets placed at it/);
    expect(assets.body.error.detail).toMatch(/cascade/);
    // ... and once the asset is gone too, the delete succeeds; a repeat is 404.
    expect((await api("DELETE", `/api/v1/assets/${a.id}`)).status).toBe(204);
    expect((await api("DELETE", `/api/v1/locations/${site.id}`)).status).toBe(204);
    expect((await api("DELETE", `/api/v1/locations/${site.id}`)).status).toBe(404);
    expect((await api("GET", `/api/v1/locations/${site.id}`)).status).toBe(404);
  });

  it("is not blocked by an asset that moved elsewhere", async () => {
    const a1 = await location();
    const a2 = await location();
    const a = await asset();
    await place(a.id, a1.id);
    await place(a.id, a2.id);
    expect((await api("DELETE", `/api/v1/locations/${a1.id}`)).status).toBe(204);
    // The pair invariant: the asset at a soft-deleted location keeps both fields.
    await place(a.id, a1.id);
    const got = (await api<Body>("GET", `/api/v1/assets/${a.id}`)).body.data;
    expect(got).toMatchObject({ location_id: a1.id, location_external_key: a1.external_key });
  });
});

describe("location rename", () => {
  it("counts live descendants, keeps children parented by id, 0 and unchanged updated_at on same value", async () => {
    const root = await location({ external_key: key("R") });
    const c1 = await location({ parent_id: root.id });
    const c2 = await location({ parent_id: root.id });
    await location({ parent_id: c1.id });
    const deleted = await location({ parent_id: c2.id });
    await api("DELETE", `/api/v1/locations/${deleted.id}`);
    const newKey = key("RN");
    const res = await api<Body>("POST", `/api/v1/locations/${root.id}/rename`, { external_key: newKey });
    expect(res.status).toBe(200);
    expect(res.body.descendant_count_affected).toBe(3);
    expect(res.body.data).toMatchObject({ id: root.id, external_key: newKey, name: "loc" });
    expect((await api<Body>("GET", `/api/v1/locations/${c1.id}`)).body.data).toMatchObject({
      parent_id: root.id,
      parent_external_key: newKey,
    });
    const same = await api<Body>("POST", `/api/v1/locations/${root.id}/rename`, { external_key: newKey });
    expect(same.body.descendant_count_affected).toBe(0);
    expect(same.body.data.updated_at).toBe(res.body.data.updated_at);
    const taken = await api<Body>("POST", `/api/v1/locations/${c1.id}/rename`, { external_key: newKey });
    expect(taken.status).toBe(409);
    const empty = await api<Body>("POST", `/api/v1/locations/${c1.id}/rename`, { external_key: " " });
    expect(fields(empty)).toEqual([["external_key", "too_short"]]);
  });
});

describe("tree endpoints", () => {
  /**
   *        root
   *      /   |    \
   *    b(2)  a(3)  c(4, inactive, expired)
   *    |  \
   *   b2   b1   (b1 created after b2: b1 has the larger id)
   */
  async function tree() {
    const root = await location({ name: "root" });
    const b = await location({ name: "same", parent_id: root.id });
    const a = await location({ name: "same", parent_id: root.id });
    const c = await location({
      name: "aaa",
      parent_id: root.id,
      is_active: false,
      valid_from: "2001-01-01T00:00:00Z",
      valid_to: "2002-01-01T00:00:00Z",
    });
    const b2 = await location({ name: "zz", parent_id: b.id });
    const b1 = await location({ name: "aa", parent_id: b.id });
    const gone = await location({ name: "gone", parent_id: a.id });
    await api("DELETE", `/api/v1/locations/${gone.id}`);
    return { root, a, b, c, b1, b2 };
  }

  it("children: name ascending then id ascending, live only regardless of is_active and validity", async () => {
    const t = await tree();
    const res = await api<Body>("GET", `/api/v1/locations/${t.root.id}/children`);
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([t.c.id, t.b.id, t.a.id]);
    expect(res.body).toMatchObject({ limit: 50, offset: 0, total_count: 3 });
    const page = await api<Body>("GET", `/api/v1/locations/${t.root.id}/children?limit=1&offset=1`);
    expect(ids(page)).toEqual([t.b.id]);
    expect(page.body).toMatchObject({ limit: 1, offset: 1, total_count: 3 });
  });

  it("descendants: depth-first preorder with id ascending tiebreak, excluding the location itself", async () => {
    const t = await tree();
    const res = await api<Body>("GET", `/api/v1/locations/${t.root.id}/descendants`);
    expect(ids(res)).toEqual([t.b.id, t.b2.id, t.b1.id, t.a.id, t.c.id]);
    expect(res.body.total_count).toBe(5);
    const page = await api<Body>("GET", `/api/v1/locations/${t.root.id}/descendants?limit=2&offset=2`);
    expect(ids(page)).toEqual([t.b1.id, t.a.id]);
    expect(page.body.total_count).toBe(5);
    const beyond = await api<Body>("GET", `/api/v1/locations/${t.root.id}/descendants?offset=10`);
    expect(beyond.body).toMatchObject({ data: [], total_count: 5 });
    const leaf = await api<Body>("GET", `/api/v1/locations/${t.b1.id}/descendants`);
    expect(leaf.body).toMatchObject({ data: [], total_count: 0 });
  });

  it("ancestors: the parent chain, root first", async () => {
    const t = await tree();
    const res = await api<Body>("GET", `/api/v1/locations/${t.b1.id}/ancestors`);
    expect(ids(res)).toEqual([t.root.id, t.b.id]);
    expect(res.body.total_count).toBe(2);
    expect(ids(await api<Body>("GET", `/api/v1/locations/${t.b1.id}/ancestors?offset=1`))).toEqual([t.b.id]);
    expect((await api<Body>("GET", `/api/v1/locations/${t.root.id}/ancestors`)).body.total_count).toBe(0);
    // An expired, inactive location still answers by id and in trees.
    expect(ids(await api<Body>("GET", `/api/v1/locations/${t.c.id}/ancestors`))).toEqual([t.root.id]);
  });

  it("rejects sort and unknown parameters, pages with the common limits, 404s missing and soft-deleted", async () => {
    const t = await tree();
    for (const view of ["ancestors", "children", "descendants"]) {
      const sorted = await api<Body>("GET", `/api/v1/locations/${t.root.id}/${view}?sort=name`);
      expect(sorted.body.error.fields).toEqual([
        { field: "sort", code: "invalid_value", message: "sort parameter not supported on this endpoint" },
      ]);
      expect(fields(await api<Body>("GET", `/api/v1/locations/${t.root.id}/${view}?limit=201`))).toEqual([["limit", "too_large"]]);
      expect(fields(await api<Body>("GET", `/api/v1/locations/${t.root.id}/${view}?is_active=true`))).toEqual([
        ["is_active", "unknown_field"],
      ]);
      expect((await api("GET", `/api/v1/locations/2147483000/${view}`)).status).toBe(404);
      expect((await other("GET", `/api/v1/locations/${t.root.id}/${view}`)).status).toBe(404);
    }
    const doomed = await location();
    await api("DELETE", `/api/v1/locations/${doomed.id}`);
    expect((await api("GET", `/api/v1/locations/${doomed.id}/children`)).status).toBe(404);
    const head = await api("HEAD", `/api/v1/locations/${t.root.id}/children`);
    expect(head.status).toBe(200);
  });
});

describe("organization isolation", () => {
  it("keeps locations, parents and keys per organization", async () => {
    const k = key("ISO");
    const mine = await location({ external_key: k });
    const theirs = await location({ external_key: k }, other);
    expect((await other("GET", `/api/v1/locations/${mine.id}`)).status).toBe(404);
    expect((await other("DELETE", `/api/v1/locations/${mine.id}`)).status).toBe(404);
    const crossParent = await other<Body>("POST", "/api/v1/locations", { name: "x", parent_id: mine.id });
    expect(fields(crossParent)).toEqual([["parent_id", "fk_not_found"]]);
    const byKey = await other<Body>("POST", "/api/v1/locations", { name: "x", parent_external_key: k });
    expect(byKey.body.data.parent_id).toBe(theirs.id);
    expect(ids(await other<Body>("GET", `/api/v1/locations?external_key=${k}`))).toEqual([theirs.id]);
  });
});
