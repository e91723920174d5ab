/** Assets end to end: identifiers, records, inbound timestamps, read, delete, rename, isolation. */
import pg from "pg";
import { eventually } from "@whereabouts/shared/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let other: ApiCall;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_assets", services: ["catalog"] });
  api = apiClient(stack, (await stack.tenant("Assets Org")).auth);
  other = apiClient(stack, (await stack.tenant("Other Org")).auth);
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ASSET_KEYS = [
  "id",
  "external_key",
  "name",
  "description",
  "is_active",
  "metadata",
  "valid_from",
  "valid_to",
  "location_id",
  "location_external_key",
  "created_at",
  "updated_at",
  "deleted_at",
  "tags",
];
const MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let counter = 0;
const key = (prefix = "A") => `${prefix}-${Date.now().toString(36)}-${++counter}`;

async function create(body: Body, call = api) {
  const res = await call<Body>("POST", "/api/v1/assets", body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}

function fields(res: { body: Body }) {
  return (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);
}

describe("asset records", () => {
  it("returns every field, nulls emitted, in a data wrapper with a Location header", async () => {
    const res = await api<Body>("POST", "/api/v1/assets", { name: "Pallet jack" });
    expect(res.status).toBe(201);
    const asset = res.body.data;
    expect(Object.keys(res.body)).toEqual(["data"]);
    expect(Object.keys(asset).sort()).toEqual([...ASSET_KEYS].sort());
    expect(res.headers.location).toBe(`/api/v1/assets/${asset.id}`);
    expect(asset).toMatchObject({
      name: "Pallet jack",
      description: null,
      is_active: true,
      metadata: {},
      valid_to: null,
      location_id: null,
      location_external_key: null,
      deleted_at: null,
      tags: [],
    });
    for (const field of ["created_at", "updated_at", "valid_from"]) expect(asset[field]).toMatch(MS_Z);
    expect(asset.valid_from).toBe(asset.created_at);
    const got = await api<Body>("GET", `/api/v1/assets/${asset.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: asset });
  });

  it("requires name and rejects an empty one", async () => {
    const missing = await api<Body>("POST", "/api/v1/assets", { description: "x" });
    expect(missing.status).toBe(400);
    expect(fields(missing)).toEqual([["name", "required"]]);
    const empty = await api<Body>("POST", "/api/v1/assets", { name: "" });
    expect(fields(empty)).toEqual([["name", "too_short"]]);
    expect(empty.body.error.fields[0].params).toEqual({ min_length: 1 });
    const nul = await api<Body>("POST", "/api/v1/assets", { name: null });
    expect(fields(nul)).toEqual([["name", "invalid_value"]]);
    const emptyDescription = await api<Body>("POST", "/api/v1/assets", { name: "n", description: "" });
    expect(fields(emptyDescription)).toEqual([["description", "too_short"]]);
  });

  it("answers a wrong JSON type with bad_request naming the field, and a non-object body likewise", async () => {
    const res = await api<Body>("POST", "/api/v1/assets", { name: 5 });
    expect(res.status).toBe(400);
    expect(res.body.error.type).toBe("bad_request");
    expect(res.body.error.detail).toContain("name");
    expect(res.body.error.fields).toBeUndefined();
    const array = await api<Body>("POST", "/api/v1/assets", [{ name: "x" }]);
    expect(array.body.error).toMatchObject({
      type: "bad_request",
      detail: "Request body could not be decoded as the expected type",
    });
  });

  it("rejects unknown keys with unknown_field", async () => {
    const res = await api<Body>("POST", "/api/v1/assets", { name: "x", colour: "red" });
    expect(fields(res)).toEqual([["colour", "unknown_field"]]);
  });

  it("validates metadata: objects only, no null", async () => {
    for (const metadata of [5, "x", true, [1, 2], null]) {
      const res = await api<Body>("POST", "/api/v1/assets", { name: "m", metadata });
      expect(res.status, JSON.stringify(metadata)).toBe(400);
      expect(fields(res)).toEqual([["metadata", "invalid_value"]]);
    }
    const asset = await create({ name: "m", metadata: { a: { b: [1, "two", null] }, c: true } });
    expect(asset.metadata).toEqual({ a: { b: [1, "two", null] }, c: true });
  });

  it("rejects the asset location on create by presence, one read_only entry per field", async () => {
    const one = await api<Body>("POST", "/api/v1/assets", { name: "x", location_id: 1 });
    expect(fields(one)).toEqual([["location_id", "read_only"]]);
    expect(one.body.error.fields[0].message).toContain("scan event ingestion");
    const both = await api<Body>("POST", "/api/v1/assets", { name: "x", location_id: null, location_external_key: null });
    expect(fields(both)).toEqual([
      ["location_id", "read_only"],
      ["location_external_key", "read_only"],
    ]);
    const ids = await api<Body>("POST", "/api/v1/assets", { name: "x", id: 5, created_at: "2026-01-01T00:00:00Z" });
    expect(fields(ids)).toEqual([
      ["id", "read_only"],
      ["created_at", "read_only"],
    ]);
  });
});

describe("external keys", () => {
  it("accepts 1..255 ASCII letters, digits and hyphens, case-sensitively", async () => {
    const long = "K".repeat(255);
    expect((await create({ name: "a", external_key: long })).external_key).toBe(long);
    const lower = key("case").toLowerCase();
    await create({ name: "lower", external_key: lower });
    expect((await create({ name: "upper", external_key: lower.toUpperCase() })).external_key).toBe(lower.toUpperCase());
    const tooLong = await api<Body>("POST", "/api/v1/assets", { name: "a", external_key: "K".repeat(256) });
    expect(fields(tooLong)).toEqual([["external_key", "too_long"]]);
    expect(tooLong.body.error.fields[0].params).toEqual({ max_length: 255 });
  });

  it("rejects every reserved character with invalid_value", async () => {
    for (const bad of ["a.b", "a_b", "a b", "a/b", "a:b", "a,b", "é", "a+b", "a#b", "ключ", "a\u0000"]) {
      const res = await api<Body>("POST", "/api/v1/assets", { name: "a", external_key: bad });
      expect(fields(res), bad).toEqual([["external_key", "invalid_value"]]);
    }
  });

  it("rejects empty and whitespace-only keys with too_short, and null with invalid_value", async () => {
    for (const bad of ["", " ", "  \t "]) {
      const res = await api<Body>("POST", "/api/v1/assets", { name: "a", external_key: bad });
      expect(fields(res), JSON.stringify(bad)).toEqual([["external_key", "too_short"]]);
    }
    const nul = await api<Body>("POST", "/api/v1/assets", { name: "a", external_key: null });
    expect(fields(nul)).toEqual([["external_key", "invalid_value"]]);
  });

  it("answers 409 for a live duplicate and lets a soft-deleted key be reused at once", async () => {
    const k = key("DUP");
    const first = await create({ name: "first", external_key: k });
    const dup = await api<Body>("POST", "/api/v1/assets", { name: "again", external_key: k });
    expect(dup.status).toBe(409);
    expect(dup.body.error.type).toBe("conflict");
    expect((await api("DELETE", `/api/v1/assets/${first.id}`)).status).toBe(204);
    const reused = await create({ name: "reused", external_key: k });
    expect(reused.id).not.toBe(first.id);
  });

  it("mints ASSET-NNNN only when the key is absent, skipping keys callers took", async () => {
    const fresh = apiClient(stack, (await stack.tenant("Mint Org")).auth);
    const a = await create({ name: "a" }, fresh);
    expect(a.external_key).toBe("ASSET-0001");
    await create({ name: "taken", external_key: "ASSET-0002" }, fresh);
    await create({ name: "taken", external_key: "ASSET-0003" }, fresh);
    const b = await create({ name: "b" }, fresh);
    expect(b.external_key).toBe("ASSET-0004");
    const empty = await fresh<Body>("POST", "/api/v1/assets", { name: "c", external_key: "" });
    expect(empty.status).toBe(400);
  });

  it("mints without making an organization's creates take turns", async () => {
    const fresh = apiClient(stack, (await stack.tenant("Mint Turns Org")).auth);
    // Hold one create inside its transaction (its tag insert waits on a lock)...
    const locker = new pg.Client({ connectionString: stack.db.url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE catalog.tags IN EXCLUSIVE MODE");
      const lockerPid = (await locker.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const held = fresh<Body>("POST", "/api/v1/assets", { name: "held", tags: [{ tag_type: "rfid", value: `HELD-${key()}` }] });
      await eventually(async () => {
        const { rows } = await locker.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [
          lockerPid,
        ]);
        return rows[0].n >= 1 ? true : undefined;
      }, 15_000);
      // ...another create in the same organization still mints and commits.
      const meanwhile = await fresh<Body>("POST", "/api/v1/assets", { name: "meanwhile" });
      expect(meanwhile.status, JSON.stringify(meanwhile.body)).toBe(201);
      await locker.query("ROLLBACK");
      const first = await held;
      expect(first.status, JSON.stringify(first.body)).toBe(201);
      expect([first.body.data.external_key, meanwhile.body.data.external_key].sort()).toEqual(["ASSET-0001", "ASSET-0002"]);
    } finally {
      await locker.end();
    }
  });

  it("never mints the same key twice under concurrency", async () => {
    const fresh = apiClient(stack, (await stack.tenant("Parallel Org")).auth);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        i % 4 === 0
          ? fresh<Body>("POST", "/api/v1/assets", { name: `caller ${i}`, external_key: `ASSET-${String(i + 1).padStart(4, "0")}` })
          : fresh<Body>("POST", "/api/v1/assets", { name: `minted ${i}` }),
      ),
    );
    // Every minted create succeeds with a key of its own. A caller's key may
    // lose the race to a minted row committed first: then it is the spec's 409
    // for a key a live row holds, never a duplicate.
    const keys: string[] = [];
    results.forEach((r, i) => {
      if (i % 4 === 0 && r.status === 409) return;
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      keys.push(r.body.data.external_key as string);
    });
    expect(keys.length).toBeGreaterThanOrEqual(9);
    expect(new Set(keys).size).toBe(keys.length);
    for (const k of keys) expect(k).toMatch(/^ASSET-\d{4,}$/);
    results.forEach((r, i) => {
      if (r.status === 409) expect(keys).toContain(`ASSET-${String(i + 1).padStart(4, "0")}`);
    });
  });

  it("rejects a non-integer, out-of-range or unknown asset id in the path", async () => {
    const zero = await api<Body>("GET", "/api/v1/assets/0");
    expect(fields(zero)).toEqual([["asset_id", "too_small"]]);
    const big = await api<Body>("GET", "/api/v1/assets/2147483648");
    expect(big.body.error.fields[0]).toMatchObject({ field: "asset_id", code: "too_large", params: { max: 2147483647 } });
    expect((await api("GET", "/api/v1/assets/2147483647")).status).toBe(404);
  });
});

describe("inbound validity timestamps", () => {
  it("converts any offset to UTC and truncates beyond microseconds toward zero", async () => {
    const asset = await create({
      name: "t",
      valid_from: "2020-06-01T12:00:00.9999999+02:30",
      valid_to: "2999-12-31T23:59:59.1239-01:00",
    });
    expect(asset.valid_from).toBe("2020-06-01T09:30:00.999Z");
    expect(asset.valid_to).toBe("3000-01-01T00:59:59.123Z");
    const lower = await create({ name: "t", valid_from: "2020-06-01t12:00:00z" });
    expect(lower.valid_from).toBe("2020-06-01T12:00:00.000Z");
  });

  it("rejects date-only, slash-separated, empty and other non-RFC 3339 text", async () => {
    for (const bad of [
      "2024-01-01",
      "2024/01/01",
      "",
      "yesterday",
      "2024-01-01T00:00:00",
      "2024-01-01 00:00:00Z",
      "2024-02-30T00:00:00Z",
      "2024-01-01T24:00:00Z",
      "2024-01-01T00:00:00+2:00",
    ]) {
      for (const field of ["valid_from", "valid_to"]) {
        const res = await api<Body>("POST", "/api/v1/assets", { name: "t", [field]: bad });
        expect(res.body.error.fields, `${field}=${bad}`).toEqual([
          { field, code: "invalid_value", message: `${field} must be an RFC 3339 timestamp` },
        ]);
      }
    }
  });

  it("rejects both sentinel instants in any offset form, naming JSON null as the unset signal", async () => {
    for (const sentinel of [
      "0001-01-01T00:00:00Z",
      "0001-01-01T00:00:00.000000Z",
      "0001-01-01T01:00:00+01:00",
      "1970-01-01T00:00:00Z",
      "1970-01-01T00:00:00.000Z",
      "1969-12-31T19:00:00-05:00",
      "1970-01-01T05:30:00+05:30",
    ]) {
      for (const field of ["valid_from", "valid_to"]) {
        const res = await api<Body>("POST", "/api/v1/assets", { name: "t", [field]: sentinel });
        expect(fields(res), `${field}=${sentinel}`).toEqual([[field, "invalid_value"]]);
        expect(res.body.error.detail).toContain("null");
      }
    }
  });

  it("accepts the instants next to the sentinels", async () => {
    const a = await create({ name: "t", valid_from: "1970-01-01T00:00:00.001Z", valid_to: "1970-01-01T00:00:01Z" });
    expect(a.valid_from).toBe("1970-01-01T00:00:00.001Z");
    const b = await create({ name: "t", valid_from: "0001-01-01T00:00:00.000001Z" });
    expect(b.valid_from).toBe("0001-01-01T00:00:00.000Z");
    const c = await create({ name: "t", valid_from: "1969-12-31T23:59:59.999Z" });
    expect(c.valid_from).toBe("1969-12-31T23:59:59.999Z");
  });

  it("rejects valid_from null and accepts valid_to null", async () => {
    const res = await api<Body>("POST", "/api/v1/assets", { name: "t", valid_from: null });
    expect(fields(res)).toEqual([["valid_from", "invalid_value"]]);
    expect((await create({ name: "t", valid_to: null })).valid_to).toBeNull();
  });
});

describe("read, delete and rename", () => {
  it("reads an expired row by id but 404s a soft-deleted one; repeat delete is 404", async () => {
    const expired = await create({ name: "old", valid_from: "2001-01-01T00:00:00Z", valid_to: "2002-01-01T00:00:00Z" });
    expect((await api("GET", `/api/v1/assets/${expired.id}`)).status).toBe(200);
    const gone = await create({ name: "gone" });
    expect((await api("DELETE", `/api/v1/assets/${gone.id}`)).status).toBe(204);
    const after = await api<Body>("GET", `/api/v1/assets/${gone.id}`);
    expect(after.status).toBe(404);
    expect(after.body.error.type).toBe("not_found");
    expect((await api("HEAD", `/api/v1/assets/${gone.id}`)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/assets/${gone.id}`)).status).toBe(404);
    expect((await api("PATCH", `/api/v1/assets/${gone.id}`, { name: "x" })).status).toBe(404);
    expect((await api("POST", `/api/v1/assets/${gone.id}/rename`, { external_key: key() })).status).toBe(404);
  });

  it("shows deleted rows with deleted_at in lists when include_deleted=true", async () => {
    const k = key("DEL");
    const asset = await create({ name: "d", external_key: k });
    await api("DELETE", `/api/v1/assets/${asset.id}`);
    const hidden = await api<Body>("GET", `/api/v1/assets?external_key=${k}`);
    expect(hidden.body.data).toEqual([]);
    const shown = await api<Body>("GET", `/api/v1/assets?external_key=${k}&include_deleted=true`);
    expect(shown.body.data).toHaveLength(1);
    expect(shown.body.data[0].deleted_at).toMatch(MS_Z);
  });

  it("renames with descendant_count_affected 0; same value leaves updated_at; taken key is 409", async () => {
    const asset = await create({ name: "r", external_key: key("R") });
    const newKey = key("RN");
    const renamed = await api<Body>("POST", `/api/v1/assets/${asset.id}/rename`, { external_key: newKey });
    expect(renamed.status).toBe(200);
    expect(renamed.body.descendant_count_affected).toBe(0);
    expect(renamed.body.data.external_key).toBe(newKey);
    expect(renamed.body.data.updated_at > asset.updated_at).toBe(true);
    const same = await api<Body>("POST", `/api/v1/assets/${asset.id}/rename`, { external_key: newKey });
    expect(same.status).toBe(200);
    expect(same.body.descendant_count_affected).toBe(0);
    expect(same.body.data.updated_at).toBe(renamed.body.data.updated_at);
    const otherAsset = await create({ name: "o", external_key: key("O") });
    const taken = await api<Body>("POST", `/api/v1/assets/${otherAsset.id}/rename`, { external_key: newKey });
    expect(taken.status).toBe(409);
    const bad = await api<Body>("POST", `/api/v1/assets/${otherAsset.id}/rename`, { external_key: "a.b" });
    expect(fields(bad)).toEqual([["external_key", "invalid_value"]]);
    const missing = await api<Body>("POST", `/api/v1/assets/${otherAsset.id}/rename`, {});
    expect(fields(missing)).toEqual([["external_key", "required"]]);
    const extra = await api<Body>("POST", `/api/v1/assets/${otherAsset.id}/rename`, { external_key: key(), name: "x" });
    expect(fields(extra)).toEqual([["name", "unknown_field"]]);
  });
});

describe("organization isolation", () => {
  it("hides another organization's assets by id, in lists and for writes; keys are per organization", async () => {
    const k = key("ISO");
    const mine = await create({ name: "mine", external_key: k });
    const theirs = await create({ name: "theirs", external_key: k }, other);
    expect(theirs.external_key).toBe(k);
    expect((await other("GET", `/api/v1/assets/${mine.id}`)).status).toBe(404);
    expect((await other("PATCH", `/api/v1/assets/${mine.id}`, { name: "x" })).status).toBe(404);
    expect((await other("DELETE", `/api/v1/assets/${mine.id}`)).status).toBe(404);
    expect((await other("POST", `/api/v1/assets/${mine.id}/rename`, { external_key: key() })).status).toBe(404);
    expect((await other("POST", `/api/v1/assets/${mine.id}/tags`, { tag_type: "rfid", value: key() })).status).toBe(404);
    const list = await other<Body>("GET", `/api/v1/assets?external_key=${k}`);
    expect(list.body.data.map((a: Body) => a.id)).toEqual([theirs.id]);
    expect((await api<Body>("GET", `/api/v1/assets/${mine.id}`)).body.data.name).toBe("mine");
  });
});
