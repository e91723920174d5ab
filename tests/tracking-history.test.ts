/**
 * GET /api/v1/assets/{asset_id}/history through the gateway: the envelope,
 * order and ties, duration_seconds over the whole history, from/to, paging,
 * query validation, 404s, and the joined location's visibility rules.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";
import { catalogFixture, publishScan, type CatalogFixture } from "../services/tracking/src/testing/tracking-fixtures.ts";

let stack: Stack;
let cat: CatalogFixture;
let orgId: number;
let auth: Record<string, string>;
let nextId = 100;
const id = () => nextId++;

const dockA = { id: 0, external_key: "DOCK-A" };
const dockB = { id: 0, external_key: "DOCK-B" };
const asset = { id: 0 };
const T = {
  t0: "2026-06-01T10:00:00.000Z",
  t1: "2026-06-01T10:00:30.500Z",
  t2: "2026-06-01T10:01:31.400Z",
  t3: "2026-06-01T10:01:31.400Z", // tie with t2, ingested later
  t4: "2026-06-01T11:00:00.000Z",
};

async function get(url: string, method: "GET" | "HEAD" = "GET") {
  const res = await stack.gateway.inject({ method, url, headers: auth });
  return { status: res.statusCode, body: method === "HEAD" ? res.body : res.json(), headers: res.headers };
}
const history = (assetId: number, query = "") => get(`/api/v1/assets/${assetId}/history${query}`);

async function waitForRows(assetId: number, count: number) {
  await eventually(async () => ((await history(assetId)).body.total_count === count ? true : undefined));
}

async function scanned(assetTag: string, location: { id: number }, observedAt: string) {
  await publishScan(stack.nc, orgId, { observed_at: observedAt, location: { id: location.id }, tags: [{ tag_type: "rfid", value: assetTag }] });
}

beforeAll(async () => {
  stack = await startStack({ label: "tracking_history", services: ["tracking"] });
  ({ orgId, auth } = await stack.tenant());
  cat = catalogFixture(stack.nc);
  dockA.id = id();
  dockB.id = id();
  asset.id = id();
  await cat.location(orgId, dockA);
  await cat.location(orgId, dockB);
  await cat.asset(orgId, asset);
  await cat.tag(orgId, { id: id(), value: "H-1", owner_type: "asset", owner_id: asset.id });
  // One at a time, so ingestion order is the order written here.
  const plan: Array<[string, typeof dockA]> = [[T.t0, dockA], [T.t1, dockA], [T.t2, dockB], [T.t3, dockA], [T.t4, dockB]];
  for (const [i, [at, where]] of plan.entries()) {
    await scanned("H-1", where, at);
    await waitForRows(asset.id, i + 1);
  }
});
afterAll(async () => stack?.close());

const row = (at: string, where: typeof dockA, duration: number | null) => ({
  event_observed_at: at,
  location_id: where.id,
  location_external_key: where.external_key,
  duration_seconds: duration,
});

describe("history page", () => {
  it("is a list envelope, newest first, ties by ingestion order, duration_seconds since the previous scan", async () => {
    const res = await history(asset.id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [row(T.t4, dockB, 3508), row(T.t3, dockA, 0), row(T.t2, dockB, 60), row(T.t1, dockA, 30), row(T.t0, dockA, null)],
      limit: 50,
      offset: 0,
      total_count: 5,
    });
  });

  it("sorts ascending on request, ties still by ingestion order", async () => {
    const asc = await history(asset.id, "?sort=event_observed_at");
    expect(asc.body.data.map((r: { location_id: number }) => r.location_id)).toEqual([dockA.id, dockA.id, dockB.id, dockA.id, dockB.id]);
    const desc = await history(asset.id, "?sort=-event_observed_at");
    expect(desc.body.data).toEqual((await history(asset.id)).body.data);
  });

  it("pages with limit and offset; durations come from the whole history", async () => {
    const res = await history(asset.id, "?limit=2&offset=1");
    expect(res.body).toEqual({ data: [row(T.t3, dockA, 0), row(T.t2, dockB, 60)], limit: 2, offset: 1, total_count: 5 });
    const asc = await history(asset.id, "?sort=event_observed_at&limit=1&offset=4");
    expect(asc.body.data).toEqual([row(T.t4, dockB, 3508)]);
    const beyond = await history(asset.id, "?offset=10");
    expect(beyond.body).toEqual({ data: [], limit: 50, offset: 10, total_count: 5 });
  });

  it("bounds by from (inclusive) and to (exclusive), durations still over the whole history", async () => {
    const res = await history(asset.id, `?from=${T.t2}&to=${T.t4}`);
    expect(res.body).toEqual({ data: [row(T.t3, dockA, 0), row(T.t2, dockB, 60)], limit: 50, offset: 0, total_count: 2 });
    const onlyFrom = await history(asset.id, `?from=${T.t1}&sort=event_observed_at`);
    expect(onlyFrom.body.data[0]).toEqual(row(T.t1, dockA, 30));
    expect(onlyFrom.body.total_count).toBe(4);
    const onlyTo = await history(asset.id, `?to=${T.t1}`);
    expect(onlyTo.body.data).toEqual([row(T.t0, dockA, null)]);
  });

  it("accepts 0 to 9 fractional digits and any offset", async () => {
    for (const from of [
      "2026-06-01T10:01:31Z",
      "2026-06-01T10:01:31.4Z",
      "2026-06-01T10:01:31.400000000Z",
      "2026-06-01T12:01:31.399999999%2B02:00",
      "2026-06-01t05:01:31.4-05:00",
    ]) {
      const res = await history(asset.id, `?from=${from}`);
      expect(res.status, from).toBe(200);
      expect(res.body.total_count, from).toBe(3);
    }
    // Truncated to microseconds, not rounded up past t2.
    expect((await history(asset.id, "?to=2026-06-01T10:01:31.4000009Z")).body.total_count).toBe(2);
  });

  it("from later than to gives an empty page", async () => {
    const res = await history(asset.id, `?from=${T.t4}&to=${T.t0}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], limit: 50, offset: 0, total_count: 0 });
  });

  it("an asset never scanned has an empty history", async () => {
    const quiet = { id: id() };
    await cat.asset(orgId, quiet);
    expect((await history(quiet.id)).body).toEqual({ data: [], limit: 50, offset: 0, total_count: 0 });
  });

  it("HEAD answers like GET without a body", async () => {
    const res = await get(`/api/v1/assets/${asset.id}/history`, "HEAD");
    expect(res.status).toBe(200);
    expect(res.body).toBe("");
  });
});

describe("ties on observed_at", () => {
  it("keep ingestion order within a batch and across batches; durations are 0 between them", async () => {
    const tied = { id: id() };
    await cat.asset(orgId, tied);
    await cat.tag(orgId, { id: id(), value: "TIE-1", owner_type: "asset", owner_id: tied.id });
    const at = "2026-06-05T08:00:00.123456Z";
    // Three in one burst (one batch, most likely), then one more later.
    await Promise.all([
      scanned("TIE-1", dockA, at),
      scanned("TIE-1", dockB, at),
      scanned("TIE-1", dockA, at),
    ]);
    await waitForRows(tied.id, 3);
    await scanned("TIE-1", dockB, at);
    await waitForRows(tied.id, 4);
    await scanned("TIE-1", dockA, "2026-06-05T08:00:05.123455Z");
    await scanned("TIE-1", dockB, "2026-06-05T07:59:59.5Z"); // late, before the ties
    await waitForRows(tied.id, 6);
    const asc = await history(tied.id, "?sort=event_observed_at");
    expect(asc.body.data.map((r: { location_id: number; duration_seconds: number | null }) => [r.location_id, r.duration_seconds])).toEqual([
      [dockB.id, null],
      [dockA.id, 0],
      [dockB.id, 0],
      [dockA.id, 0],
      [dockB.id, 0],
      [dockA.id, 4],
    ]);
    expect(asc.body.data[1].event_observed_at).toBe("2026-06-05T08:00:00.123Z");
    const desc = await history(tied.id);
    expect(desc.body.data).toEqual([...asc.body.data].reverse());
    // from is inclusive of every tie, to exclusive of all of them.
    expect((await history(tied.id, `?from=${at}`)).body.total_count).toBe(5);
    expect((await history(tied.id, `?to=${at}`)).body.total_count).toBe(1);
  });
});

describe("history query validation", () => {
  const fieldsOf = (body: { error: { type: string; fields: Array<{ field: string; code: string; message: string }> } }) =>
    body.error.fields.map((f) => [f.field, f.code]);

  it("rejects timestamps that are not RFC 3339 on from and to with invalid_value", async () => {
    for (const bad of ["2026-06-01", "2026/06/01T10:00:00Z", "", "yesterday", "2026-06-01T10:00:00", "2026-06-01T10:00:00.1234567890Z", "2026-02-30T00:00:00Z"]) {
      const res = await history(asset.id, `?from=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.type).toBe("validation_error");
      expect(fieldsOf(res.body), bad).toEqual([["from", "invalid_value"]]);
    }
    const both = await history(asset.id, "?from=x&to=y");
    expect(fieldsOf(both.body)).toEqual([
      ["from", "invalid_value"],
      ["to", "invalid_value"],
    ]);
  });

  it("rejects an unknown sort field", async () => {
    const res = await history(asset.id, "?sort=name");
    expect(res.status).toBe(400);
    expect(res.body.error.fields[0]).toMatchObject({ field: "sort", code: "invalid_value", message: "unknown sort field: name" });
  });

  it("rejects is_active and any other unknown query key with unknown_field", async () => {
    for (const key of ["is_active=true", "include_deleted=true", "location_id=1", "foo=bar"]) {
      const res = await history(asset.id, `?${key}`);
      expect(res.status, key).toBe(400);
      expect(fieldsOf(res.body)).toEqual([[key.split("=")[0], "unknown_field"]]);
    }
  });

  it("applies the list limits", async () => {
    expect(fieldsOf((await history(asset.id, "?limit=201")).body)).toEqual([["limit", "too_large"]]);
    expect(fieldsOf((await history(asset.id, "?limit=0")).body)).toEqual([["limit", "too_small"]]);
    expect(fieldsOf((await history(asset.id, "?offset=-1")).body)).toEqual([["offset", "too_small"]]);
    expect(fieldsOf((await history(asset.id, "?limit=ten")).body)).toEqual([["limit", "invalid_value"]]);
    expect((await history(asset.id, "?limit=200")).status).toBe(200);
  });
});

describe("history 404 and path rules", () => {
  it("is 404 for an asset that does not exist or belongs to another organization", async () => {
    expect((await history(987_654)).body.error.type).toBe("not_found");
    const other = await stack.tenant("Other");
    const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${asset.id}/history`, headers: other.auth });
    expect(res.statusCode).toBe(404);
  });

  it("is 404 as soon as the asset's deletion was acknowledged", async () => {
    for (let i = 0; i < 20; i++) {
      const doomed = { id: id() };
      await cat.asset(orgId, doomed);
      expect((await history(doomed.id)).status).toBe(200);
      await cat.asset(orgId, { ...doomed, deleted_at: new Date().toISOString() }, { verb: "deleted" });
      expect((await history(doomed.id)).status).toBe(404);
    }
  });

  it("range-checks the path id", async () => {
    const res = await history(0);
    expect(res.status).toBe(400);
    expect(res.body.error.fields[0]).toMatchObject({ field: "asset_id", code: "too_small" });
  });
});

describe("joined location", () => {
  async function oneScanAt(location: { id: number; external_key: string }) {
    const a = { id: id() };
    const value = `J-${a.id}`;
    await cat.asset(orgId, a);
    await cat.tag(orgId, { id: id(), value, owner_type: "asset", owner_id: a.id });
    await scanned(value, location, "2026-06-02T00:00:00Z");
    await waitForRows(a.id, 1);
    return a;
  }

  it("is null (both fields) when the location is not currently effective", async () => {
    const expiring = { id: id(), external_key: `EXP-${nextId}` };
    await cat.location(orgId, expiring);
    const a = await oneScanAt(expiring);
    await cat.location(orgId, { ...expiring, valid_to: "2026-01-01T00:00:00Z" }, { verb: "updated" });
    expect((await history(a.id)).body.data[0]).toMatchObject({ location_id: null, location_external_key: null });
    await cat.location(orgId, { ...expiring, valid_from: "2999-01-01T00:00:00Z" }, { verb: "updated" });
    expect((await history(a.id)).body.data[0]).toMatchObject({ location_id: null, location_external_key: null });
    await cat.location(orgId, { ...expiring }, { verb: "updated" });
    expect((await history(a.id)).body.data[0]).toMatchObject({ location_id: expiring.id, location_external_key: expiring.external_key });
  });

  it("keeps both fields when the location is soft-deleted", async () => {
    const doomed = { id: id(), external_key: `GONE-${nextId}` };
    await cat.location(orgId, doomed);
    const a = await oneScanAt(doomed);
    await cat.location(orgId, { ...doomed, deleted_at: "2026-06-03T00:00:00Z" }, { verb: "deleted" });
    expect((await history(a.id)).body.data[0]).toMatchObject({ location_id: doomed.id, location_external_key: doomed.external_key });
  });

  it("shows the location's current key after a rename", async () => {
    const renamed = { id: id(), external_key: `OLD-${nextId}` };
    await cat.location(orgId, renamed);
    const a = await oneScanAt(renamed);
    await cat.location(orgId, { ...renamed, external_key: "NEW-NAME" }, { verb: "renamed" });
    expect((await history(a.id)).body.data[0]).toMatchObject({ location_id: renamed.id, location_external_key: "NEW-NAME" });
  });
});
