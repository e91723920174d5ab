/** Tags end to end: attach, detach, uniqueness, values, embedded arrays, creates with tags. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let other: ApiCall;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_tags", services: ["catalog"] });
  api = apiClient(stack, (await stack.tenant("Tags Org")).auth);
  other = apiClient(stack, (await stack.tenant("Other Tags Org")).auth);
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TAG_KEYS = ["id", "tag_type", "value", "is_active", "valid_from", "valid_to", "created_at", "updated_at"];
let counter = 0;
const value = (prefix = "V") => `${prefix}-${Date.now().toString(36)}-${++counter}`;
const fields = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);

async function create(kind: "assets" | "locations", body: Body = {}, call = api) {
  const res = await call<Body>("POST", `/api/v1/${kind}`, { name: "owner", ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}
const attach = (kind: "assets" | "locations", id: number, body: unknown, call = api) =>
  call<Body>("POST", `/api/v1/${kind}/${id}/tags`, body);

describe("attach", () => {
  for (const kind of ["assets", "locations"] as const) {
    it(`attaches to ${kind}: 201, the tag record, a Location header, and the embedded array`, async () => {
      const owner = await create(kind);
      const v = value();
      const res = await attach(kind, owner.id, { tag_type: "ble", value: v });
      expect(res.status).toBe(201);
      const tag = res.body.data;
      expect(Object.keys(tag).sort()).toEqual([...TAG_KEYS].sort());
      expect(tag).toMatchObject({ tag_type: "ble", value: v, is_active: true, valid_to: null });
      expect(res.headers.location).toBe(`/api/v1/${kind}/${owner.id}/tags/${tag.id}`);
      const got = await api<Body>("GET", `/api/v1/${kind}/${owner.id}`);
      expect(got.body.data.tags).toEqual([tag]);
      expect(got.body.data.updated_at).toBe(owner.updated_at);
    });
  }

  it("keeps (tag_type, value) unique per organization across assets and locations", async () => {
    const a = await create("assets");
    const l = await create("locations");
    const v = value("U");
    expect((await attach("assets", a.id, { tag_type: "rfid", value: v })).status).toBe(201);
    const dupAsset = await attach("assets", a.id, { tag_type: "rfid", value: v });
    expect(dupAsset.status).toBe(409);
    expect(dupAsset.body.error.type).toBe("conflict");
    expect((await attach("locations", l.id, { tag_type: "rfid", value: v })).status).toBe(409);
    // Another type with the same value, and another organization, are fine.
    expect((await attach("locations", l.id, { tag_type: "barcode", value: v })).status).toBe(201);
    const foreign = await create("assets", {}, other);
    expect((await attach("assets", foreign.id, { tag_type: "rfid", value: v }, other)).status).toBe(201);
    // Case matters: a different value.
    expect((await attach("assets", a.id, { tag_type: "rfid", value: v.toLowerCase() })).status).toBe(201);
  });

  it("validates the tag request", async () => {
    const a = await create("assets");
    const unknown = await attach("assets", a.id, { tag_type: "nfc", value: "x" });
    expect(unknown.body.error.fields).toEqual([
      expect.objectContaining({ field: "tag_type", code: "invalid_value", params: { allowed_values: ["rfid", "ble", "barcode"] } }),
    ]);
    expect(fields(await attach("assets", a.id, { value: "x" }))).toEqual([["tag_type", "required"]]);
    expect(fields(await attach("assets", a.id, { tag_type: "rfid" }))).toEqual([["value", "required"]]);
    expect(fields(await attach("assets", a.id, { tag_type: "rfid", value: "" }))).toEqual([["value", "too_short"]]);
    const long = await attach("assets", a.id, { tag_type: "rfid", value: "x".repeat(256) });
    expect(long.body.error.fields[0]).toMatchObject({ field: "value", code: "too_long", params: { max_length: 255 } });
    expect(fields(await attach("assets", a.id, { tag_type: "rfid", value: "x", colour: 1 }))).toEqual([["colour", "unknown_field"]]);
    expect(fields(await attach("assets", a.id, { tag_type: "rfid", value: "x", valid_from: null }))).toEqual([
      ["valid_from", "invalid_value"],
    ]);
    expect((await attach("assets", a.id, { tag_type: 1, value: "x" })).body.error.type).toBe("bad_request");
  });

  it("accepts any character but C0 controls other than tab, newline and carriage return", async () => {
    const a = await create("assets");
    for (const bad of ["\u0000", "a\u0001", "\u0008", "\u000B", "\u000C", "\u000E", "\u001F", "\u007F"]) {
      const res = await attach("assets", a.id, { tag_type: "barcode", value: `x${bad}` });
      expect(fields(res), JSON.stringify(bad)).toEqual([["value", "invalid_value"]]);
    }
    for (const good of ["tab\there", "line\nbreak", "cr\rhere", "ünïcödé ✓", "with space.and_under/score", "😀".repeat(255)]) {
      const res = await attach("assets", a.id, { tag_type: "barcode", value: good });
      expect(res.status, JSON.stringify(good)).toBe(201);
      expect(res.body.data.value).toBe(good);
    }
  });

  it("answers 404 for a missing, soft-deleted or foreign owner", async () => {
    expect((await attach("assets", 2147483000, { tag_type: "rfid", value: value() })).status).toBe(404);
    const gone = await create("locations");
    await api("DELETE", `/api/v1/locations/${gone.id}`);
    expect((await attach("locations", gone.id, { tag_type: "rfid", value: value() })).status).toBe(404);
    const mine = await create("assets");
    expect((await attach("assets", mine.id, { tag_type: "rfid", value: value() }, other)).status).toBe(404);
  });
});

describe("detach", () => {
  it("soft-deletes: 204, gone from the embedded array, pair reusable at once, repeat 404", async () => {
    const a = await create("assets");
    const v = value("D");
    const tag = (await attach("assets", a.id, { tag_type: "rfid", value: v })).body.data;
    expect((await api("DELETE", `/api/v1/assets/${a.id}/tags/${tag.id}`)).status).toBe(204);
    expect((await api<Body>("GET", `/api/v1/assets/${a.id}`)).body.data.tags).toEqual([]);
    expect((await api("DELETE", `/api/v1/assets/${a.id}/tags/${tag.id}`)).status).toBe(404);
    const again = await attach("assets", a.id, { tag_type: "rfid", value: v });
    expect(again.status).toBe(201);
    expect(again.body.data.id).not.toBe(tag.id);
  });

  it("answers 404 for another parent's tag, the other resource type, and another organization", async () => {
    const a = await create("assets");
    const b = await create("assets");
    const l = await create("locations");
    const tag = (await attach("assets", a.id, { tag_type: "rfid", value: value() })).body.data;
    expect((await api("DELETE", `/api/v1/assets/${b.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/locations/${l.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await other("DELETE", `/api/v1/assets/${a.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/assets/${a.id}/tags/2147483000`)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/assets/${a.id}/tags/${tag.id}`)).status).toBe(204);
  });

  it("frees the pairs of an owner that is deleted", async () => {
    const a = await create("assets");
    const v = value("OWN");
    await attach("assets", a.id, { tag_type: "ble", value: v });
    await api("DELETE", `/api/v1/assets/${a.id}`);
    const b = await create("assets");
    expect((await attach("assets", b.id, { tag_type: "ble", value: v })).status).toBe(201);
  });
});

describe("embedded tags and creates with tags", () => {
  it("embeds only active, currently effective, live tags, by id", async () => {
    const a = await create("assets");
    const active = (await attach("assets", a.id, { tag_type: "rfid", value: value() })).body.data;
    const hidden = [value("INACTIVE"), value("EXPIRED"), value("FUTURE")];
    await attach("assets", a.id, { tag_type: "rfid", value: hidden[0], is_active: false });
    await attach("assets", a.id, { tag_type: "rfid", value: hidden[1], valid_to: "2001-01-01T00:00:00Z" });
    await attach("assets", a.id, { tag_type: "rfid", value: hidden[2], valid_from: "2999-01-01T00:00:00Z" });
    // q matches only active, currently effective tag values (visibility rule 5).
    for (const v of hidden) expect((await api<Body>("GET", `/api/v1/assets?q=${v}`)).body.data, v).toEqual([]);
    expect((await api<Body>("GET", `/api/v1/assets?q=${active.value}`)).body.data.map((x: Body) => x.id)).toEqual([a.id]);
    const later = (await attach("assets", a.id, { tag_type: "ble", value: value(), valid_from: "2001-01-01T00:00:00+01:00" }))
      .body.data;
    expect(later.valid_from).toBe("2000-12-31T23:00:00.000Z");
    const got = await api<Body>("GET", `/api/v1/assets/${a.id}`);
    expect(got.body.data.tags.map((t: Body) => t.id)).toEqual([active.id, later.id]);
  });

  it("creates an asset and a location with tags in one transaction", async () => {
    const v1 = value("C1");
    const v2 = value("C2");
    const a = await create("assets", { tags: [{ tag_type: "rfid", value: v1 }, { tag_type: "ble", value: v2, is_active: true }] });
    expect(a.tags.map((t: Body) => [t.tag_type, t.value])).toEqual([
      ["rfid", v1],
      ["ble", v2],
    ]);
    const l = await create("locations", { tags: [{ tag_type: "barcode", value: v1 }] });
    expect(l.tags).toHaveLength(1);
    // A duplicate pair rolls the whole create back.
    const k = value("ROLLBACK");
    const dup = await api<Body>("POST", "/api/v1/assets", { name: "x", external_key: k, tags: [{ tag_type: "rfid", value: v1 }] });
    expect(dup.status).toBe(409);
    // The error names the tag that is taken.
    expect(dup.body.error.detail).toBe(`A tag with tag_type 'rfid' and value '${v1}' is already attached in this organization`);
    expect((await api<Body>("GET", `/api/v1/assets?external_key=${k}`)).body.data).toEqual([]);
    const inner = await api<Body>("POST", "/api/v1/assets", {
      name: "x",
      tags: [
        { tag_type: "rfid", value: "ok" },
        { tag_type: "wifi", value: "" },
      ],
    });
    expect(fields(inner)).toEqual([
      ["tags[1].tag_type", "invalid_value"],
      ["tags[1].value", "too_short"],
    ]);
    expect(fields(await api<Body>("POST", "/api/v1/assets", { name: "x", tags: null }))).toEqual([["tags", "invalid_value"]]);
  });
});
