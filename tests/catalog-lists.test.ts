/** Asset and location lists: paging, sort, filters, q, visibility rules, query validation. */
import { jetstream } from "@nats-io/jetstream";
import { encodeJson } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let api: ApiCall;
let orgId: number;

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const fields = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);
const keys = (res: { body: Body }) => (res.body.data as Body[]).map((r) => r.external_key);

async function post(path: string, body: Body, call = api) {
  const res = await call<Body>("POST", path, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}

/** Fixture: five assets in their own tenant, so totals are exact. */
let fx: { api: ApiCall; assets: Body[]; dock: Body; yard: Body };

beforeAll(async () => {
  stack = await startStack({ label: "catalog_lists", services: ["catalog"] });
  const tenant = await stack.tenant("Lists Org");
  orgId = tenant.orgId;
  api = apiClient(stack, tenant.auth);
  const dock = await post("/api/v1/locations", { name: "Dock", external_key: "DOCK" });
  const yard = await post("/api/v1/locations", { name: "Yard", external_key: "YARD" });
  const assets = [];
  for (const [k, name, extra] of [
    ["B-2", "banana", { description: "Yellow FRUIT" }],
    ["A-1", "cherry", { is_active: false }],
    ["C-3", "apple", { tags: [{ tag_type: "rfid", value: "E2801160-XYZ" }] }],
    ["D-4", "apple", { tags: [{ tag_type: "rfid", value: "HIDDEN-TAG", is_active: false }] }],
    ["E-5", "date", { metadata: { percent: "100%_sure" } }],
  ] as const) {
    assets.push(await post("/api/v1/assets", { external_key: k, name, ...extra }));
  }
  // Not listed by default: expired, future and deleted rows.
  await post("/api/v1/assets", { external_key: "X-EXPIRED", name: "apple", valid_to: "2001-01-01T00:00:00Z" });
  await post("/api/v1/assets", { external_key: "X-FUTURE", name: "apple", valid_from: "2999-01-01T00:00:00Z" });
  const deleted = await post("/api/v1/assets", { external_key: "X-DELETED", name: "apple" });
  await api("DELETE", `/api/v1/assets/${deleted.id}`);
  // Positions: B-2 and C-3 at the dock, A-1 in the yard.
  const js = jetstream(stack.nc);
  let seq = 0;
  for (const [asset, loc] of [
    [assets[0]!, dock],
    [assets[2]!, dock],
    [assets[1]!, yard],
  ] as Array<[Body, Body]>) {
    seq++;
    await js.publish(
      `tracking.events.${orgId}.asset.moved`,
      encodeJson({
        version: 1,
        event_id: `moved:${orgId}:${asset.id}:${seq}`,
        org_id: orgId,
        asset_id: asset.id,
        location_id: loc.id,
        observed_at: "2026-01-01T00:00:00.000Z",
        seq,
      }),
    );
  }
  fx = { api, assets, dock, yard };
});
afterAll(async () => stack?.close());

describe("paging", () => {
  it("defaults to limit 50, offset 0, with total_count across pages", async () => {
    const res = await api<Body>("GET", "/api/v1/assets");
    expect(res.body).toMatchObject({ limit: 50, offset: 0, total_count: 5 });
    expect(keys(res)).toEqual(["A-1", "B-2", "C-3", "D-4", "E-5"]);
    const page = await api<Body>("GET", "/api/v1/assets?limit=2&offset=2");
    expect(page.body).toMatchObject({ limit: 2, offset: 2, total_count: 5 });
    expect(keys(page)).toEqual(["C-3", "D-4"]);
    const beyond = await api<Body>("GET", "/api/v1/assets?offset=99");
    expect(beyond.body).toEqual({ data: [], limit: 50, offset: 99, total_count: 5 });
    // DECISIONS.md "Sizes the spec leaves open": offset at most 2147483647, beyond is too_large.
    const huge = await api<Body>("GET", "/api/v1/assets?offset=1000000000000000000000");
    expect(fields(huge)).toEqual([["offset", "too_large"]]);
    expect((await api<Body>("GET", "/api/v1/assets?limit=200")).status).toBe(200);
  });

  it("rejects bad limits and offsets", async () => {
    const big = await api<Body>("GET", "/api/v1/assets?limit=201");
    expect(big.body.error.fields).toEqual([expect.objectContaining({ field: "limit", code: "too_large", params: { max: 200 } })]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?limit=0"))).toEqual([["limit", "too_small"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?offset=-1"))).toEqual([["offset", "too_small"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?limit=ten"))).toEqual([["limit", "invalid_value"]]);
    expect(fields(await api<Body>("GET", "/api/v1/locations?limit=500"))).toEqual([["limit", "too_large"]]);
  });
});

describe("sort", () => {
  it("sorts by comma lists with '-' for descending, id as the final tiebreak", async () => {
    expect(keys(await api<Body>("GET", "/api/v1/assets?sort=-external_key"))).toEqual(["E-5", "D-4", "C-3", "B-2", "A-1"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?sort=name"))).toEqual(["C-3", "D-4", "B-2", "A-1", "E-5"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?sort=name,-external_key"))).toEqual(["D-4", "C-3", "B-2", "A-1", "E-5"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?sort=-created_at"))).toEqual(["E-5", "D-4", "C-3", "A-1", "B-2"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?sort=updated_at"))).toEqual(["B-2", "A-1", "C-3", "D-4", "E-5"]);
    expect(keys(await api<Body>("GET", "/api/v1/locations?sort=-name"))).toEqual(["YARD", "DOCK"]);
  });

  it("rejects unknown sort fields by name, per endpoint", async () => {
    const res = await api<Body>("GET", "/api/v1/assets?sort=name,colour");
    expect(res.body.error.fields).toEqual([expect.objectContaining({ field: "sort", code: "invalid_value", message: "unknown sort field: colour" })]);
    const loc = await api<Body>("GET", "/api/v1/locations?sort=-updated_at");
    expect(loc.body.error.fields[0].message).toBe("unknown sort field: updated_at");
  });
});

describe("filters", () => {
  it("treats repeated parameters as any-of and rejects commas in key filters", async () => {
    expect(keys(await api<Body>("GET", "/api/v1/assets?external_key=C-3&external_key=A-1&external_key=NOPE"))).toEqual(["A-1", "C-3"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?external_key=NOPE"))).toEqual([]);
    const comma = await api<Body>("GET", "/api/v1/assets?external_key=A-1,C-3");
    expect(fields(comma)).toEqual([["external_key", "invalid_value"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?external_key=a.b"))).toEqual([["external_key", "invalid_value"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?external_key="))).toEqual([["external_key", "too_short"]]);
    expect(fields(await api<Body>("GET", "/api/v1/locations?parent_external_key=A,B"))).toEqual([
      ["parent_external_key", "invalid_value"],
    ]);
  });

  it("filters by location in either form (placement from tracking events)", async () => {
    const { dock, yard } = fx;
    expect(keys(await api<Body>("GET", `/api/v1/assets?location_id=${dock.id}`))).toEqual(["B-2", "C-3"]);
    expect(keys(await api<Body>("GET", `/api/v1/assets?location_id=${dock.id}&location_id=${yard.id}`))).toEqual([
      "A-1",
      "B-2",
      "C-3",
    ]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?location_external_key=YARD"))).toEqual(["A-1"]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?location_id=0"))).toEqual([["location_id", "too_small"]]);
    const row = (await api<Body>("GET", "/api/v1/assets?external_key=B-2")).body.data[0];
    expect(row).toMatchObject({ location_id: dock.id, location_external_key: "DOCK" });
  });

  it("answers ambiguous_fields with one entry per parameter of a pair", async () => {
    const res = await api<Body>("GET", `/api/v1/assets?location_id=1&location_external_key=DOCK`);
    expect(fields(res)).toEqual([
      ["location_id", "ambiguous_fields"],
      ["location_external_key", "ambiguous_fields"],
    ]);
    expect(fields(await api<Body>("GET", `/api/v1/locations?parent_id=1&parent_external_key=DOCK`))).toEqual([
      ["parent_id", "ambiguous_fields"],
      ["parent_external_key", "ambiguous_fields"],
    ]);
  });

  it("rejects unknown query keys and bad booleans", async () => {
    expect(fields(await api<Body>("GET", "/api/v1/assets?colour=red"))).toEqual([["colour", "unknown_field"]]);
    expect(fields(await api<Body>("GET", "/api/v1/locations?metadata=x"))).toEqual([["metadata", "unknown_field"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?is_active=yes"))).toEqual([["is_active", "invalid_value"]]);
    expect(fields(await api<Body>("GET", "/api/v1/assets?include_deleted=1"))).toEqual([["include_deleted", "invalid_value"]]);
  });

  it("filters on is_active and shows deleted rows only with include_deleted=true", async () => {
    expect(keys(await api<Body>("GET", "/api/v1/assets?is_active=false"))).toEqual(["A-1"]);
    expect((await api<Body>("GET", "/api/v1/assets?is_active=true")).body.total_count).toBe(4);
    const withDeleted = await api<Body>("GET", "/api/v1/assets?include_deleted=true");
    expect(keys(withDeleted)).toEqual(["A-1", "B-2", "C-3", "D-4", "E-5", "X-DELETED"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?include_deleted=true&is_active=false"))).toEqual(["A-1"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?external_key=X-DELETED"))).toEqual([]);
    // Expired and future rows stay hidden from every list (rule 2) but answer by id (rule 3).
    expect(keys(await api<Body>("GET", "/api/v1/assets?external_key=X-EXPIRED&include_deleted=true"))).toEqual([]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?external_key=X-FUTURE"))).toEqual([]);
  });
});

describe("q", () => {
  it("matches name, external_key, description and active effective tag values, case-insensitively", async () => {
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=APPLE"))).toEqual(["C-3", "D-4"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=e-5"))).toEqual(["E-5"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=yellow%20fruit"))).toEqual(["B-2"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=1160-x"))).toEqual(["C-3"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=hidden-tag"))).toEqual([]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=sure"))).toEqual([]);
    // LIKE wildcards are literal characters.
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=%25"))).toEqual([]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=_"))).toEqual([]);
    expect((await api<Body>("GET", "/api/v1/assets?q=apple&limit=1")).body.total_count).toBe(2);
    expect(keys(await api<Body>("GET", "/api/v1/locations?q=doc"))).toEqual(["DOCK"]);
  });

  it("sorts and pages its matches as the list does, in either direction and by several fields", async () => {
    const matches = await api<Body>("GET", "/api/v1/assets?q=e&sort=name,-external_key");
    expect(keys(matches)).toEqual(["D-4", "C-3", "B-2", "A-1", "E-5"]);
    const page = await api<Body>("GET", "/api/v1/assets?q=e&sort=name,-external_key&limit=2&offset=1");
    expect(keys(page)).toEqual(["C-3", "B-2"]);
    expect(page.body.total_count).toBe(5);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=p&sort=-created_at"))).toEqual(["D-4", "C-3"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=apple&sort=-updated_at,name"))).toEqual(["D-4", "C-3"]);
    expect(keys(await api<Body>("GET", "/api/v1/assets?q=a&sort=-external_key&offset=3"))).toEqual(["B-2", "A-1"]);
  });

  it("matches location tag values", async () => {
    const l = await post("/api/v1/locations", { name: "Gate", tags: [{ tag_type: "barcode", value: "GATE-BARCODE-77" }] });
    expect(keys(await api<Body>("GET", "/api/v1/locations?q=barcode-77"))).toEqual([l.external_key]);
  });
});

describe("location list filters", () => {
  it("filters by parent in either form and by is_active", async () => {
    const p = await post("/api/v1/locations", { name: "P", external_key: "PARENT-L" });
    const c1 = await post("/api/v1/locations", { name: "c1", external_key: "CHILD-1", parent_id: p.id });
    await post("/api/v1/locations", { name: "c2", external_key: "CHILD-2", parent_id: p.id, is_active: false });
    await post("/api/v1/locations", { name: "g", external_key: "GRANDCHILD", parent_id: c1.id });
    expect(keys(await api<Body>("GET", `/api/v1/locations?parent_id=${p.id}`))).toEqual(["CHILD-1", "CHILD-2"]);
    expect(keys(await api<Body>("GET", `/api/v1/locations?parent_external_key=PARENT-L&is_active=true`))).toEqual(["CHILD-1"]);
    expect(keys(await api<Body>("GET", `/api/v1/locations?parent_id=${p.id}&parent_id=${c1.id}&sort=-external_key`))).toEqual([
      "GRANDCHILD",
      "CHILD-2",
      "CHILD-1",
    ]);
    expect(keys(await api<Body>("GET", `/api/v1/locations?external_key=PARENT-L&external_key=CHILD-2`))).toEqual([
      "CHILD-2",
      "PARENT-L",
    ]);
  });
});

describe("total_count of whole-organization lists (counted once, kept exact)", () => {
  it("moves with every write at once, through any kind of write", async () => {
    const call = apiClient(stack, (await stack.tenant("Count Org")).auth);
    const total = async (path: string) => (await call<Body>("GET", path)).body.total_count as number;
    expect(await total("/api/v1/assets")).toBe(0);
    const a = await post("/api/v1/assets", { name: "one" }, call);
    expect(await total("/api/v1/assets")).toBe(1);
    expect(await total("/api/v1/assets")).toBe(1);
    await post("/api/v1/assets", { name: "two", is_active: false }, call);
    expect(await total("/api/v1/assets")).toBe(2);
    expect(await total("/api/v1/assets?is_active=true")).toBe(1);
    const patched = await call("PATCH", `/api/v1/assets/${a.id}`, { valid_to: "2000-01-01T00:00:00Z" });
    expect(patched.status).toBe(200);
    expect(await total("/api/v1/assets")).toBe(1);
    expect(await total("/api/v1/assets?is_active=true")).toBe(0);
    expect((await call("DELETE", `/api/v1/assets/${a.id}`)).status).toBe(204);
    expect(await total("/api/v1/assets?include_deleted=true")).toBe(1);
    await post("/api/v1/locations", { name: "L" }, call);
    expect(await total("/api/v1/locations")).toBe(1);
  });

  it("changes when a row's validity window opens, with no write in between", async () => {
    const call = apiClient(stack, (await stack.tenant("Window Org")).auth);
    const opensAt = Date.now() + 1500;
    await post("/api/v1/assets", { name: "now" }, call);
    await post("/api/v1/assets", { name: "soon", valid_from: new Date(opensAt).toISOString() }, call);
    const total = async () => (await call<Body>("GET", "/api/v1/assets")).body.total_count as number;
    expect(await total()).toBe(1);
    // Polled with a deadline: the count must change once the window opens.
    let seen = await total();
    while (seen === 1 && Date.now() < opensAt + 5000) seen = await total();
    expect(seen).toBe(2);
    expect(Date.now()).toBeGreaterThanOrEqual(opensAt);
  });
});

/**
 * Whole-organization pages are served again while current (page-cache.ts):
 * a read never sees a page older than a write it made, a tag's validity
 * boundary, or a position this catalog applied.
 */
describe("pages served again", () => {
  it("show a write at once to the client that made it, page after page", async () => {
    const call = apiClient(stack, (await stack.tenant("Page Writes Org")).auth);
    const a = await post("/api/v1/assets", { name: "first" }, call);
    const names = async (query = "") => ((await call<Body>("GET", `/api/v1/assets${query}`)).body.data as Body[]).map((r) => r.name);
    for (let i = 0; i < 5; i++) {
      expect(await names()).toEqual([`${i === 0 ? "first" : `name ${i - 1}`}`]);
      expect(await names()).toEqual([`${i === 0 ? "first" : `name ${i - 1}`}`]);
      // A search's page too: the renamed asset enters it with the first rename.
      expect(await names("?q=name")).toEqual(i === 0 ? [] : [`name ${i - 1}`]);
      expect(await names("?q=name")).toEqual(i === 0 ? [] : [`name ${i - 1}`]);
      expect((await call("PATCH", `/api/v1/assets/${a.id}`, { name: `name ${i}` })).status).toBe(200);
    }
    expect(await names()).toEqual(["name 4"]);
    const tagged = await call<Body>("POST", `/api/v1/assets/${a.id}/tags`, { tag_type: "rfid", value: "PAGE-TAG" });
    expect(tagged.status, JSON.stringify(tagged.body)).toBe(201);
    expect(((await call<Body>("GET", "/api/v1/assets")).body.data as Body[])[0]!.tags.map((t: Body) => t.value)).toEqual(["PAGE-TAG"]);
  });

  it("show a tag from the first read after its validity window opens, with no write in between", async () => {
    const call = apiClient(stack, (await stack.tenant("Page Window Org")).auth);
    const opensAt = Date.now() + 1500;
    await post("/api/v1/assets", { name: "tagged", tags: [{ tag_type: "rfid", value: "LATER", valid_from: new Date(opensAt).toISOString() }] }, call);
    // Read over and over (so a page is always fresh from the cache) across the boundary:
    // every read that starts after it must show the tag.
    let reads = 0;
    let shownAfter = 0;
    while (shownAfter < 20 && Date.now() < opensAt + 5000) {
      const startedAt = Date.now();
      const tags = ((await call<Body>("GET", "/api/v1/assets")).body.data as Body[])[0]!.tags as Body[];
      reads++;
      if (startedAt > opensAt) {
        expect(tags.map((t) => t.value), `read ${reads}, started ${startedAt - opensAt} ms after the boundary`).toEqual(["LATER"]);
        shownAfter++;
      } else if (startedAt < opensAt - 50) expect(tags).toEqual([]);
    }
    expect(shownAfter).toBe(20);
  });

  it("of a search follow its matches across validity boundaries, with no write in between", async () => {
    const call = apiClient(stack, (await stack.tenant("Search Window Org")).auth);
    // Three instants a second apart, each the only boundary that changes the search then:
    // an asset's window opens (matched by name), a tag's opens (matched by the tag, its owner
    // not on the page before), a tag's closes (its owner on the page).
    const start = Date.now();
    const [opens, tagOpens, tagCloses] = [start + 1500, start + 2500, start + 3500] as const;
    const iso = (at: number) => new Date(at).toISOString();
    await post("/api/v1/assets", { external_key: "S-1", name: "zebra later", valid_from: iso(opens) }, call);
    await post("/api/v1/assets", { external_key: "S-2", name: "plain", tags: [{ tag_type: "rfid", value: "ZEBRA-SOON", valid_from: iso(tagOpens) }] }, call);
    await post("/api/v1/assets", { external_key: "S-3", name: "zebra now" }, call);
    await post("/api/v1/assets", { external_key: "S-4", name: "plain", tags: [{ tag_type: "rfid", value: "ZEBRA-GONE", valid_to: iso(tagCloses) }] }, call);
    await post("/api/v1/assets", { external_key: "S-5", name: "other" }, call);
    const states: Array<[number, string[]]> = [
      [0, ["S-3", "S-4"]],
      [opens, ["S-1", "S-3", "S-4"]],
      [tagOpens, ["S-1", "S-2", "S-3", "S-4"]],
      [tagCloses, ["S-1", "S-2", "S-3"]],
    ];
    // Read over and over (a page is nearly always fresh from the cache) across the boundaries: a
    // read that starts after one shows what follows it (those within 50 ms before one are not judged).
    const judged = new Map<number, number>();
    while ((judged.get(tagCloses) ?? 0) < 20 && Date.now() < tagCloses + 5000) {
      const startedAt = Date.now();
      const page = (await call<Body>("GET", "/api/v1/assets?q=zebra&sort=external_key")).body;
      const i = states.findLastIndex(([at]) => startedAt > at);
      const next = states[i + 1]?.[0];
      if (next !== undefined && startedAt >= next - 50) continue;
      const [at, expected] = states[i]!;
      expect([keys({ body: page }), page.total_count], `read started ${startedAt - at} ms after boundary ${i}`).toEqual([expected, expected.length]);
      judged.set(at, (judged.get(at) ?? 0) + 1);
    }
    expect(states.map(([at]) => (judged.get(at) ?? 0) > 0)).toEqual([true, true, true, true]);
    expect(judged.get(tagCloses)).toBe(20);
  });

  it("show a position this catalog applied from the read after it", async () => {
    const tenant = await stack.tenant("Page Moves Org");
    const call = apiClient(stack, tenant.auth);
    const asset = await post("/api/v1/assets", { name: "mover" }, call);
    const places = [await post("/api/v1/locations", { name: "P1" }, call), await post("/api/v1/locations", { name: "P2" }, call)];
    const js = jetstream(stack.nc);
    const listed = async (query = "") => ((await call<Body>("GET", `/api/v1/assets${query}`)).body.data as Body[])[0]!.location_id;
    expect(await listed()).toBeNull();
    for (let seq = 1; seq <= 4; seq++) {
      const place = places[seq % 2]!;
      await js.publish(
        `tracking.events.${tenant.orgId}.asset.moved`,
        encodeJson({
          version: 1,
          event_id: `moved:${tenant.orgId}:${asset.id}:${seq}`,
          org_id: tenant.orgId,
          asset_id: asset.id,
          location_id: place.id,
          observed_at: new Date(Date.parse("2026-01-01T00:00:00Z") + seq * 1000).toISOString(),
          seq,
        }),
      );
      // The read by id shows it once the catalog applied it (polled: no promise for scan data); the page then at once.
      const deadline = Date.now() + 10_000;
      while ((await call<Body>("GET", `/api/v1/assets/${asset.id}`)).body.data.location_id !== place.id) expect(Date.now()).toBeLessThan(deadline);
      expect(await listed()).toBe(place.id);
      expect(await listed()).toBe(place.id);
      expect(await listed("?q=mover")).toBe(place.id);
      expect(await listed("?q=mover")).toBe(place.id);
    }
  });
});
