/**
 * Hostile input end to end (issue 10): the sizes DECISIONS.md settles, deep
 * nesting, lone surrogates, numbers beyond the double range, wrong JSON types
 * and odd query keys. Every case is a 4xx of the spec with nothing written;
 * the bounds themselves are accepted. Each limit comes from the one shared
 * module, never a number repeated here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  callRpc,
  DESCRIPTION_MAX_LENGTH,
  METADATA_MAX_BYTES,
  METADATA_MAX_DEPTH,
  NAME_MAX_LENGTH,
  newRequestId,
  OFFSET_MAX,
  Q_MAX_LENGTH,
  TAGS_PER_CREATE_MAX,
  TAGS_PER_OWNER_MAX,
  type RpcRequest,
} from "@whereabouts/shared";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let principal: RpcRequest["principal"];

beforeAll(async () => {
  stack = await startStack({ label: "catalog_limits", services: ["catalog", "tracking", "reporting"] });
  const tenant = await stack.tenant("Limits Org");
  api = apiClient(stack, tenant.auth);
  principal = { key_id: 1, org_id: tenant.orgId, scopes: [] };
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let counter = 0;
const key = (prefix = "L") => `${prefix}-${Date.now().toString(36)}-${++counter}`;
const fields = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);
const json = { "content-type": "application/json" };
const mergePatch = { "content-type": "application/merge-patch+json" };

async function create(kind: "assets" | "locations", body: Body = {}) {
  const res = await api<Body>("POST", `/api/v1/${kind}`, { name: "n", ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}

/** Nothing with this key was written. */
async function expectAbsent(kind: "assets" | "locations", externalKey: string) {
  const res = await api<Body>("GET", `/api/v1/${kind}?external_key=${externalKey}&include_deleted=true`);
  expect(res.body.total_count).toBe(0);
}

/** `{"a":{"a":...{}}}` with `levels` objects. */
const nested = (levels: number) => '{"a":'.repeat(levels - 1) + "{}" + "}".repeat(levels - 1);
const nestedValue = (levels: number): Body => {
  let value: Body = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
};

/** Random CJK characters: 3 bytes each in UTF-8, and they do not compress. */
const cjk = (n: number) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20000))).join("");
/** Characters outside the BMP: two UTF-16 units, 4 bytes each. */
const astral = (n: number) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x1f300 + (i % 700))).join("");

/** Every list endpoint, on a fresh asset and location: the common list rules apply to each. */
async function everyList(): Promise<string[]> {
  const asset = await create("assets");
  const location = await create("locations");
  return [
    "/api/v1/assets",
    "/api/v1/locations",
    `/api/v1/locations/${location.id}/children`,
    `/api/v1/locations/${location.id}/ancestors`,
    `/api/v1/locations/${location.id}/descendants`,
    `/api/v1/assets/${asset.id}/history`,
    "/api/v1/reports/asset-locations",
  ];
}

describe("sizes (DECISIONS.md)", () => {
  for (const kind of ["assets", "locations"] as const) {
    it(`${kind}: name up to ${NAME_MAX_LENGTH} characters, even ones a btree entry could not hold whole`, async () => {
      for (const name of [cjk(NAME_MAX_LENGTH), astral(NAME_MAX_LENGTH), "x".repeat(NAME_MAX_LENGTH)]) {
        const created = await create(kind, { name });
        expect(created.name).toBe(name);
      }
      for (const name of [cjk(NAME_MAX_LENGTH + 1), "x".repeat(900_000)]) {
        const k = key();
        const res = await api<Body>("POST", `/api/v1/${kind}`, { name, external_key: k });
        expect(res.status).toBe(400);
        expect(fields(res)).toEqual([["name", "too_long"]]);
        expect(res.body.error.fields[0].params).toEqual({ max_length: NAME_MAX_LENGTH });
        await expectAbsent(kind, k);
      }
      const owner = await create(kind);
      const patch = await api<Body>("PATCH", `/api/v1/${kind}/${owner.id}`, { name: astral(NAME_MAX_LENGTH + 1) });
      expect(fields(patch)).toEqual([["name", "too_long"]]);
    });

    it(`${kind}: description up to ${DESCRIPTION_MAX_LENGTH} characters`, async () => {
      expect((await create(kind, { description: cjk(DESCRIPTION_MAX_LENGTH) })).description).toHaveLength(DESCRIPTION_MAX_LENGTH);
      const owner = await create(kind);
      const res = await api<Body>("PATCH", `/api/v1/${kind}/${owner.id}`, { description: "d".repeat(DESCRIPTION_MAX_LENGTH + 1) });
      expect(fields(res)).toEqual([["description", "too_long"]]);
      expect(res.body.error.fields[0].params).toEqual({ max_length: DESCRIPTION_MAX_LENGTH });
      expect((await api<Body>("GET", `/api/v1/${kind}/${owner.id}`)).body.data.description).toBeNull();
    });

    it(`${kind}: at most ${TAGS_PER_CREATE_MAX} tags on create, ${TAGS_PER_OWNER_MAX} live tags in all`, async () => {
      const tags = (n: number) => Array.from({ length: n }, () => ({ tag_type: "rfid", value: key("T") }));
      const k = key();
      const tooMany = await api<Body>("POST", `/api/v1/${kind}`, { name: "t", external_key: k, tags: tags(TAGS_PER_CREATE_MAX + 1) });
      expect(fields(tooMany)).toEqual([["tags", "too_long"]]);
      expect(tooMany.body.error.fields[0].params).toEqual({ max_items: TAGS_PER_CREATE_MAX });
      await expectAbsent(kind, k);
      const thousands = await api<Body>("POST", `/api/v1/${kind}`, { name: "t", external_key: k, tags: tags(10_000) });
      expect(fields(thousands)).toEqual([["tags", "too_long"]]);
      await expectAbsent(kind, k);

      const owner = await create(kind, { tags: tags(TAGS_PER_OWNER_MAX) });
      expect(owner.tags).toHaveLength(TAGS_PER_OWNER_MAX);
      const beyond = await api<Body>("POST", `/api/v1/${kind}/${owner.id}/tags`, { tag_type: "ble", value: key("B") });
      expect(beyond.status).toBe(409);
      expect(beyond.body.error.type).toBe("conflict");
      expect(beyond.body.error.detail).toContain(`at most ${TAGS_PER_OWNER_MAX}`);
      // Inactive tags are live too; a detached one makes room.
      const tagId = owner.tags[0].id;
      expect((await api("DELETE", `/api/v1/${kind}/${owner.id}/tags/${tagId}`)).status).toBe(204);
      expect((await api("POST", `/api/v1/${kind}/${owner.id}/tags`, { tag_type: "ble", value: key("B"), is_active: false })).status).toBe(201);
      expect((await api("POST", `/api/v1/${kind}/${owner.id}/tags`, { tag_type: "ble", value: key("B") })).status).toBe(409);
      // The largest record there can be still reads back.
      expect((await api<Body>("GET", `/api/v1/${kind}/${owner.id}`)).status).toBe(200);
    });

    it(`${kind}: concurrent attaches never pass the ${TAGS_PER_OWNER_MAX} live tags`, async () => {
      const owner = await create(kind, {
        tags: Array.from({ length: TAGS_PER_OWNER_MAX - 2 }, () => ({ tag_type: "rfid", value: key("C") })),
      });
      const results = await Promise.all(
        Array.from({ length: 6 }, () => api("POST", `/api/v1/${kind}/${owner.id}/tags`, { tag_type: "barcode", value: key("P") })),
      );
      expect(results.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409, 409]);
      expect((await api<Body>("GET", `/api/v1/${kind}/${owner.id}`)).body.data.tags).toHaveLength(TAGS_PER_OWNER_MAX);
    });
  }

  it(`metadata: at most ${METADATA_MAX_BYTES} bytes as compact JSON and ${METADATA_MAX_DEPTH} levels`, async () => {
    const fill = (bytes: number) => ({ f: "m".repeat(bytes - '{"f":""}'.length) });
    expect(Buffer.byteLength(JSON.stringify(fill(METADATA_MAX_BYTES)))).toBe(METADATA_MAX_BYTES);
    expect((await create("assets", { metadata: fill(METADATA_MAX_BYTES) })).metadata).toEqual(fill(METADATA_MAX_BYTES));
    const k = key();
    const big = await api<Body>("POST", "/api/v1/assets", { name: "m", external_key: k, metadata: fill(METADATA_MAX_BYTES + 1) });
    expect(fields(big)).toEqual([["metadata", "too_long"]]);
    expect(big.body.error.fields[0].params).toEqual({ max_bytes: METADATA_MAX_BYTES });

    expect((await create("assets", { metadata: nestedValue(METADATA_MAX_DEPTH) })).metadata).toEqual(nestedValue(METADATA_MAX_DEPTH));
    const deep = await api<Body>("POST", "/api/v1/assets", { name: "m", external_key: k, metadata: nestedValue(METADATA_MAX_DEPTH + 1) });
    expect(fields(deep)).toEqual([["metadata", "invalid_value"]]);
    expect(deep.body.error.fields[0].params).toEqual({ max_depth: METADATA_MAX_DEPTH });
    await expectAbsent("assets", k);
  });

  it(`offset at most ${OFFSET_MAX} on every list, history and report included: too_large`, async () => {
    const lists = await everyList();
    for (const list of lists) {
      const ok = await api<Body>("GET", `${list}?offset=${OFFSET_MAX}`);
      expect(ok.status, list).toBe(200);
      expect(ok.body).toMatchObject({ data: [], offset: OFFSET_MAX });
      for (const offset of [String(OFFSET_MAX + 1), "9223372036854775808", "99999999999999999999"]) {
        const res = await api<Body>("GET", `${list}?offset=${offset}`);
        expect(res.status, `${list} ${offset}`).toBe(400);
        expect(fields(res)).toEqual([["offset", "too_large"]]);
        expect(res.body.error.fields[0].params).toEqual({ max: OFFSET_MAX });
      }
    }
  });

  it(`q: at most ${Q_MAX_LENGTH} characters and no NUL, on assets, locations and the report`, async () => {
    for (const list of ["/api/v1/assets", "/api/v1/locations", "/api/v1/reports/asset-locations"]) {
      expect((await api("GET", `${list}?q=${encodeURIComponent(cjk(Q_MAX_LENGTH))}`)).status, list).toBe(200);
      const long = await api<Body>("GET", `${list}?q=${"q".repeat(Q_MAX_LENGTH + 1)}`);
      expect(fields(long)).toEqual([["q", "too_long"]]);
      expect(long.body.error.fields[0].params).toEqual({ max_length: Q_MAX_LENGTH });
      expect(fields(await api<Body>("GET", `${list}?q=a%00b`))).toEqual([["q", "invalid_value"]]);
    }
  });
});

describe("nesting", () => {
  for (const [label, body] of [
    ["metadata", (deep: string) => `{"name":"d","external_key":"K","metadata":{"x":${deep}}}`],
    ["an unknown field", (deep: string) => `{"name":"d","external_key":"K","zzz":${deep}}`],
  ] as const) {
    it(`JSON nested thousands of levels deep in ${label}: 400 at once, on POST and PATCH of both resources`, async () => {
      const owners = { assets: await create("assets"), locations: await create("locations") };
      for (const depth of [4_000, 200_000]) {
        const deep = "[".repeat(depth) + "]".repeat(depth);
        for (const kind of ["assets", "locations"] as const) {
          const k = key();
          const post = await api<Body>("POST", `/api/v1/${kind}`, body(deep).replace('"K"', `"${k}"`), json);
          expect(post.status).toBe(400);
          expect(post.body.error.type).toBe("validation_error");
          expect(post.body.error.fields[0]).toMatchObject({ code: "invalid_value", params: { max_depth: METADATA_MAX_DEPTH } });
          await expectAbsent(kind, k);
          const patch = await api<Body>("PATCH", `/api/v1/${kind}/${owners[kind].id}`, body(deep).replace(',"external_key":"K"', ""), mergePatch);
          expect(patch.status).toBe(400);
        }
      }
    });
  }

  it("the service refuses deep bodies itself, before any recursive walk", async () => {
    const envelope = (body: unknown): RpcRequest => ({
      request_id: newRequestId(),
      principal,
      method: "POST",
      route: "/api/v1/assets",
      path: "/api/v1/assets",
      params: {},
      query: {},
      body,
    });
    const reply = await callRpc(stack.nc, "catalog.asset.create", envelope({ name: "d", metadata: nestedValue(3_000) }), { timeoutMs: 10_000 });
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ error: { fields: [{ field: "metadata", code: "invalid_value", params: { max_depth: METADATA_MAX_DEPTH } }] } });
    const unknown = await callRpc(stack.nc, "catalog.asset.create", envelope({ name: "d", zzz: nestedValue(3_000) }), { timeoutMs: 10_000 });
    expect(unknown.status).toBe(400);
    const surrogate = await callRpc(stack.nc, "catalog.asset.create", envelope({ name: "a\ud800b" }), { timeoutMs: 10_000 });
    expect(surrogate.body).toMatchObject({ error: { fields: [{ field: "name", code: "invalid_value" }] } });
  });

  it(`exactly ${METADATA_MAX_DEPTH} levels of metadata pass the gateway and the service`, async () => {
    const res = await api<Body>("POST", "/api/v1/assets", `{"name":"d","metadata":${nested(METADATA_MAX_DEPTH)}}`, json);
    expect(res.status).toBe(201);
    const deeper = await api<Body>("POST", "/api/v1/assets", `{"name":"d","metadata":${nested(METADATA_MAX_DEPTH + 1)}}`, json);
    expect(fields(deeper)).toEqual([["metadata", "invalid_value"]]);
  });
});

describe("strings are Unicode text", () => {
  it("a lone surrogate anywhere in a body: 400 invalid_value naming the field, nothing stored", async () => {
    const asset = await create("assets", { name: "before" });
    for (const [payload, field] of [
      ['{"name":"\\ud800x"}', "name"],
      ['{"name":"x\\udc00"}', "name"],
      ['{"description":"ok \\ud83d\\ude00 then \\ud83d"}', "description"],
      ['{"metadata":{"k":["a","\\udfff"]}}', "metadata.k[1]"],
      ['{"metadata":{"\\ud800":1}}', "metadata.\ufffd"],
    ] as const) {
      const res = await api<Body>("PATCH", `/api/v1/assets/${asset.id}`, payload, mergePatch);
      expect(res.status, payload).toBe(400);
      expect(fields(res), payload).toEqual([[field, "invalid_value"]]);
    }
    const k = key();
    const post = await api<Body>("POST", "/api/v1/locations", `{"name":"\\udbff","external_key":"${k}"}`, json);
    expect(fields(post)).toEqual([["name", "invalid_value"]]);
    await expectAbsent("locations", k);
    const tag = await api<Body>("POST", `/api/v1/assets/${asset.id}/tags`, '{"tag_type":"rfid","value":"\\ud800"}', json);
    expect(fields(tag)).toEqual([["value", "invalid_value"]]);
    // A proper pair is text like any other.
    const emoji = await api<Body>("PATCH", `/api/v1/assets/${asset.id}`, '{"name":"\\ud83d\\ude00"}', mergePatch);
    expect(emoji.body.data.name).toBe("😀");
  });

  it("bytes that are not UTF-8 are refused, never replaced", async () => {
    const asset = await create("assets", { name: "before" });
    for (const bytes of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf]]) {
      const payload = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from(bytes), Buffer.from('"}')]);
      const res = await stack.gateway.inject({
        method: "PATCH",
        url: `/api/v1/assets/${asset.id}`,
        headers: { ...(await authOf()), ...mergePatch },
        payload,
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ type: "bad_request", detail: "Request body is not valid JSON" });
    }
    expect((await api<Body>("GET", `/api/v1/assets/${asset.id}`)).body.data.name).toBe("before");
  });
});

let tenantAuth: Record<string, string> | undefined;
async function authOf() {
  tenantAuth ??= (await stack.tenant("Bytes Org")).auth;
  return tenantAuth;
}

describe("numbers beyond the double range", () => {
  it("1e400 and -1e400 anywhere in a body: 400 bad_request naming the field, before anything is written", async () => {
    const parent = await create("locations");
    const child = await create("locations", { parent_id: parent.id, description: "keep" });
    for (const [payload, field] of [
      ['{"parent_id": -1e400}', "parent_id"],
      ['{"parent_id": 1E+400}', "parent_id"],
      ['{"description": 1e400}', "description"],
      ['{"name": "n", "valid_to": 1e999}', "valid_to"],
    ] as const) {
      const res = await api<Body>("PATCH", `/api/v1/locations/${child.id}`, payload, mergePatch);
      expect(res.status, payload).toBe(400);
      expect(res.body.error.type).toBe("bad_request");
      expect(res.body.error.detail).toContain(`'${field}'`);
    }
    const after = (await api<Body>("GET", `/api/v1/locations/${child.id}`)).body.data;
    expect(after).toMatchObject({ parent_id: parent.id, description: "keep", updated_at: child.updated_at });

    const k = key();
    const meta = await api<Body>("POST", "/api/v1/assets", `{"name":"m","external_key":"${k}","metadata":{"a":[1,2,1e400]}}`, json);
    expect(meta.body.error).toMatchObject({ type: "bad_request" });
    expect(meta.body.error.detail).toContain("'metadata.a[2]'");
    await expectAbsent("assets", k);
    // Large but finite numbers are numbers.
    const fine = await create("assets", { metadata: { big: 1e308, small: -1e-300 } });
    expect(fine.metadata).toEqual({ big: 1e308, small: -1e-300 });
  });
});

describe("wrong JSON types", () => {
  it("a number where a string belongs: 400 bad_request whose detail names the field", async () => {
    const asset = await create("assets");
    const location = await create("locations");
    for (const [url, body, field] of [
      [`/api/v1/assets/${asset.id}`, { description: 12 }, "description"],
      [`/api/v1/assets/${asset.id}`, { valid_to: 5 }, "valid_to"],
      [`/api/v1/assets/${asset.id}`, { deleted_at: 5 }, "deleted_at"],
      [`/api/v1/assets/${asset.id}`, { name: "ok", valid_from: 5 }, "valid_from"],
      [`/api/v1/assets/${asset.id}`, { external_key: 5 }, "external_key"],
      [`/api/v1/locations/${location.id}`, { description: 12 }, "description"],
      [`/api/v1/locations/${location.id}`, { parent_external_key: 7 }, "parent_external_key"],
      [`/api/v1/locations/${location.id}`, { deleted_at: 5 }, "deleted_at"],
      [`/api/v1/locations/${location.id}`, { is_active: "true" }, "is_active"],
    ] as const) {
      const res = await api<Body>("PATCH", url, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.type, JSON.stringify(body)).toBe("bad_request");
      expect(res.body.error.detail).toContain(`'${field}'`);
      expect(res.body.error.fields).toBeUndefined();
    }
    for (const [url, body, field] of [
      ["/api/v1/assets", { name: "n", description: 12 }, "description"],
      ["/api/v1/locations", { name: "n", parent_id: "1" }, "parent_id"],
      ["/api/v1/assets", { name: "n", tags: [{ tag_type: "rfid", value: 12 }] }, "tags[0].value"],
      [`/api/v1/assets/${asset.id}/rename`, { external_key: 12 }, "external_key"],
    ] as const) {
      const res = await api<Body>("POST", url, body);
      expect(res.body.error.type, JSON.stringify(body)).toBe("bad_request");
      expect(res.body.error.detail).toContain(`'${field}'`);
    }
    expect((await api<Body>("GET", `/api/v1/assets/${asset.id}`)).body.data.updated_at).toBe(asset.updated_at);
  });
});

describe("query keys", () => {
  it("__proto__, constructor and other inherited names are unknown keys on every list", async () => {
    const lists = await everyList();
    for (const list of lists) {
      for (const name of ["__proto__", "constructor", "toString", "hasOwnProperty", "__proto__[x]"]) {
        const res = await api<Body>("GET", `${list}?${encodeURIComponent(name)}=1`);
        expect(res.status, `${list} ${name}`).toBe(400);
        expect(fields(res)).toEqual([[name, "unknown_field"]]);
      }
    }
  });

  it("a query that is not percent-encoded UTF-8 is refused, never replaced", async () => {
    for (const query of ["q=%FF", "q=%ED%A0%80", "%C3=1"]) {
      const res = await api<Body>("GET", `/api/v1/assets?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error.type).toBe("bad_request");
    }
    expect((await api("GET", "/api/v1/assets?q=%C3%A9")).status).toBe(200);
  });
});

describe("sorting by name", () => {
  it("orders long names by the whole name, the index prefix being equal", async () => {
    const prefix = `${key("S")}-${"p".repeat(600)}`;
    const names = [`${prefix}b`, `${prefix}a`, `${prefix}`, `${prefix}c`];
    for (const name of names) await create("locations", { name });
    const res = await api<Body>("GET", `/api/v1/locations?q=${prefix.slice(0, 20)}&sort=name`);
    expect(res.body.data.map((l: Body) => l.name)).toEqual([...names].sort());
    const desc = await api<Body>("GET", `/api/v1/locations?q=${prefix.slice(0, 20)}&sort=-name`);
    expect(desc.body.data.map((l: Body) => l.name)).toEqual([...names].sort().reverse());
  });
});

describe("replies within the broker's max payload", () => {
  it("a page of the largest records is cut to what fits, its limit says so, and paging on reaches every row", async () => {
    const big = apiClient(stack, (await stack.tenant("Big Records Org")).auth);
    // About 130 KB of JSON each: control characters take six bytes escaped.
    const record = (i: number) => ({
      name: `${i}`.padStart(4, "0") + "\u0001".repeat(NAME_MAX_LENGTH - 4),
      description: "\u0001".repeat(DESCRIPTION_MAX_LENGTH),
      metadata: { f: "\u0001".repeat(Math.floor((METADATA_MAX_BYTES - 16) / 6)) },
    });
    const maxPayload = stack.nc.info!.max_payload;
    const count = Math.ceil((1.3 * maxPayload) / 130_000);
    for (let i = 0; i < count; i++) expect((await big("POST", "/api/v1/assets", record(i))).status).toBe(201);
    const seen: string[] = [];
    let offset = 0;
    for (;;) {
      const page = await big<Body>("GET", `/api/v1/assets?limit=200&sort=name&offset=${offset}`);
      expect(page.status).toBe(200);
      expect(page.body.total_count).toBe(count);
      expect(page.body.data.length).toBe(Math.min(page.body.limit, count - offset));
      seen.push(...page.body.data.map((a: Body) => a.name.slice(0, 4)));
      if (offset === 0) expect(page.body.limit).toBeLessThan(count);
      if (offset + page.body.limit >= count) break;
      offset += page.body.limit;
    }
    expect(seen).toEqual(Array.from({ length: count }, (_, i) => `${i}`.padStart(4, "0")));
  });
});
