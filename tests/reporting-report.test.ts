/**
 * GET /api/v1/reports/asset-locations: rows, visibility, filters, q, sort,
 * paging and organization isolation. Reporting runs alone; the test publishes
 * catalog and tracking events itself. No polling anywhere: every request is
 * made right after the publishes were acknowledged, so each also checks
 * read-your-writes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEventPublisher, type EventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
let a: { orgId: number; auth: Record<string, string> };
let b: { orgId: number; auth: Record<string, string> };
let pubA: EventPublisher;
let pubB: EventPublisher;

const PAST = "2025-01-01T00:00:00.000Z";
const LONG_AGO = "2024-01-01T00:00:00.000Z";
const FUTURE = "2099-01-01T00:00:00.000Z";
const at = (minute: number) => `2026-11-20T10:${String(minute).padStart(2, "0")}:00.250Z`;

async function report(auth: Record<string, string>, query = "") {
  const res = await stack.gateway.inject({
    method: "GET",
    url: `/api/v1/reports/asset-locations${query ? `?${query}` : ""}`,
    headers: auth,
  });
  return res;
}
async function ids(query = "", auth = a.auth): Promise<number[]> {
  const res = await report(auth, query);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data as Array<{ asset_id: number }>).map((r) => r.asset_id);
}

beforeAll(async () => {
  stack = await startStack({ label: "reporting_report", services: ["reporting"] });
  a = await stack.tenant("Report A");
  b = await stack.tenant("Report B");
  pubA = createEventPublisher(stack.nc, a.orgId);
  pubB = createEventPublisher(stack.nc, b.orgId);

  await pubA.location({ id: 101, key: "DOCK-1" });
  await pubA.location({ id: 102, key: "DOCK-2", deletedAt: PAST });
  await pubA.location({ id: 103, key: "YARD-3", validFrom: LONG_AGO, validTo: PAST });
  await pubA.location({ id: 104, key: "FUTURE-4", validFrom: FUTURE });
  await pubA.location({ id: 105, key: "ROOM-5" });

  await pubA.scannedAsset({ id: 1, key: "PUMP-1", name: "Hydraulic Pump", locationId: 101, observedAt: at(0) });
  await pubA.scannedAsset({ id: 2, key: "PUMP-2", locationId: 102, observedAt: at(1) });
  await pubA.scannedAsset({ id: 3, key: "CRATE-3", locationId: 103, observedAt: at(2) });
  await pubA.scannedAsset({ id: 4, key: "CRATE-4", locationId: 104, observedAt: at(3) });
  await pubA.scannedAsset({ id: 5, key: "drill-5", name: "Cordless drill", locationId: 105, observedAt: at(4) });
  await pubA.tag({ id: 501, assetId: 5, value: "E2801160ABC" });
  await pubA.tag({ id: 502, assetId: 5, value: "INACTIVE-VAL", isActive: false });
  await pubA.tag({ id: 503, assetId: 5, value: "OLD-VAL", validFrom: LONG_AGO, validTo: PAST });
  await pubA.tag({ id: 504, assetId: 5, value: "GONE-VAL" });
  await pubA.tag({ id: 504, assetId: 5, value: "GONE-VAL", deletedAt: PAST, version: 2 });
  await pubA.tag({ id: 505, assetId: 5, value: "SOON-VAL", validFrom: FUTURE });
  await pubA.tag({ id: 506, assetId: 101, value: "LOCTAG-XYZ", ownerType: "location" });
  await pubA.tag({ id: 507, assetId: 5, value: "License-Plate-5", tagType: "barcode" });
  await pubA.scannedAsset({ id: 6, key: "DELETED-6", locationId: 101, observedAt: at(5), deletedAt: PAST });
  await pubA.scannedAsset({ id: 7, key: "EXPIRED-7", locationId: 101, observedAt: at(6), validFrom: LONG_AGO, validTo: PAST });
  await pubA.asset({ id: 8, key: "NEVER-8" });
  await pubA.scannedAsset({ id: 9, key: "FUTURE-9", locationId: 101, observedAt: at(8), validFrom: FUTURE });
  await pubA.scannedAsset({ id: 10, key: "ODD-10", name: "100%_done", locationId: 105, observedAt: at(7) });

  // Organization B reuses the same ids: rows are per organization.
  await pubB.location({ id: 101, key: "B-DOCK" });
  await pubB.scannedAsset({ id: 1, key: "B-ASSET-1", name: "Hydraulic thing", locationId: 101, observedAt: at(30) });
  await pubB.scannedAsset({ id: 12, key: "PUMP-1", locationId: 101, observedAt: at(31) });
});
afterAll(async () => stack?.close());

describe("rows", () => {
  it("lists one row per scanned, visible asset, newest scan first, every field present", async () => {
    const res = await report(a.auth);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ limit: 50, offset: 0, total_count: 6 });
    expect(body.data.map((r: { asset_id: number }) => r.asset_id)).toEqual([10, 5, 4, 3, 2, 1]);
    for (const row of body.data) {
      expect(Object.keys(row).sort()).toEqual(
        ["asset_deleted_at", "asset_external_key", "asset_id", "asset_last_seen", "location_external_key", "location_id"].sort(),
      );
      expect(row.asset_last_seen).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    }
    expect(body.data[5]).toEqual({
      asset_id: 1,
      asset_external_key: "PUMP-1",
      location_id: 101,
      location_external_key: "DOCK-1",
      asset_deleted_at: null,
      asset_last_seen: at(0),
    });
  });

  it("soft-deleted location: location_id kept, location_external_key null", async () => {
    const row = (await report(a.auth, "asset_id=2")).json().data[0];
    expect(row).toMatchObject({ asset_id: 2, location_id: 102, location_external_key: null });
  });

  it("location not currently effective (expired or not yet valid): both location fields null, the row stays", async () => {
    const rows = (await report(a.auth, "asset_id=3&asset_id=4")).json().data;
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row).toMatchObject({ location_id: null, location_external_key: null });
  });

  it("never-scanned assets are absent, even when asked for", async () => {
    const res = await report(a.auth, "asset_external_key=NEVER-8&include_deleted=true");
    expect(res.json()).toMatchObject({ data: [], total_count: 0 });
  });

  it("hides soft-deleted assets unless include_deleted=true", async () => {
    expect(await ids("include_deleted=false")).toEqual([10, 5, 4, 3, 2, 1]);
    const res = await report(a.auth, "include_deleted=true");
    expect(res.json().total_count).toBe(7);
    const deleted = res.json().data.find((r: { asset_id: number }) => r.asset_id === 6);
    expect(deleted).toMatchObject({ asset_external_key: "DELETED-6", asset_deleted_at: PAST, location_id: 101 });
  });

  it("applies the currently-effective predicate to the asset (expired and future assets never appear)", async () => {
    const all = await ids("include_deleted=true&limit=200");
    expect(all).not.toContain(7);
    expect(all).not.toContain(9);
    expect(await ids("asset_id=7&asset_id=9&include_deleted=true")).toEqual([]);
  });

  it("checks validity at query time: rows and locations expire without any write", async () => {
    const soon = new Date(Date.now() + 1500).toISOString();
    await pubA.location({ id: 106, key: "TEMP-6", validTo: soon });
    await pubA.scannedAsset({ id: 11, key: "TEMP-ASSET-11", locationId: 106, observedAt: at(20) });
    await pubA.scannedAsset({ id: 12, key: "TEMP-ASSET-12", locationId: 101, observedAt: at(21), validTo: soon });
    const before = (await report(a.auth, "asset_id=11&asset_id=12")).json().data;
    expect(before.map((r: { asset_id: number }) => r.asset_id)).toEqual([12, 11]);
    expect(before[1]).toMatchObject({ location_id: 106, location_external_key: "TEMP-6" });
    // No write happens; polling until the instant has passed and the report shows it.
    const after = await eventually(async () => {
      const data = (await report(a.auth, "asset_id=11&asset_id=12")).json().data;
      return Date.now() > Date.parse(soon) && data.length === 1 ? data : undefined;
    }, 15_000);
    expect(after).toEqual([expect.objectContaining({ asset_id: 11, location_id: null, location_external_key: null })]);
    // Leave the shared fixture as it was for the other tests.
    await pubA.asset({ id: 11, key: "TEMP-ASSET-11", deletedAt: PAST, version: 2 });
  });
});

describe("filters", () => {
  it("asset_id and asset_external_key are repeatable (any of); keys are case-sensitive", async () => {
    expect(await ids("asset_id=1&asset_id=5")).toEqual([5, 1]);
    expect(await ids("asset_external_key=PUMP-1&asset_external_key=drill-5")).toEqual([5, 1]);
    expect(await ids("asset_external_key=pump-1")).toEqual([]);
    expect(await ids("asset_id=99999")).toEqual([]);
  });

  it("location_id matches the location the row shows (soft-deleted kept, not-effective never)", async () => {
    expect(await ids("location_id=101")).toEqual([1]);
    expect(await ids("location_id=101&include_deleted=true")).toEqual([6, 1]);
    expect(await ids("location_id=102")).toEqual([2]);
    expect(await ids("location_id=103&location_id=104")).toEqual([]);
    expect(await ids("location_id=101&location_id=105")).toEqual([10, 5, 1]);
  });

  it("location_external_key matches the key the row shows (a soft-deleted location's key never)", async () => {
    expect(await ids("location_external_key=DOCK-1")).toEqual([1]);
    expect(await ids("location_external_key=DOCK-2")).toEqual([]);
    expect(await ids("location_external_key=YARD-3")).toEqual([]);
    expect(await ids("location_external_key=DOCK-1&location_external_key=ROOM-5")).toEqual([10, 5, 1]);
    expect(await ids("location_external_key=dock-1")).toEqual([]);
  });

  it("the asset pair and the location pair intersect", async () => {
    expect(await ids("location_external_key=ROOM-5&asset_id=5")).toEqual([5]);
    expect(await ids("location_id=101&asset_external_key=drill-5")).toEqual([]);
    expect(await ids("location_id=105&asset_external_key=drill-5&asset_external_key=ODD-10&asset_external_key=PUMP-1")).toEqual([10, 5]);
    const res = await report(a.auth, "location_id=105&asset_id=10");
    expect(res.json().total_count).toBe(1);
  });
});

describe("q", () => {
  it("matches asset name and external_key, case-insensitively", async () => {
    expect(await ids("q=hydraulic")).toEqual([1]);
    expect(await ids("q=PUMP")).toEqual([2, 1]);
    expect(await ids("q=DrIlL-5")).toEqual([5]);
  });

  it("matches active, currently-effective, attached asset tag values only", async () => {
    expect(await ids("q=e2801160")).toEqual([5]);
    expect(await ids("q=INACTIVE-VAL")).toEqual([]);
    expect(await ids("q=OLD-VAL")).toEqual([]);
    expect(await ids("q=GONE-VAL")).toEqual([]);
    expect(await ids("q=SOON-VAL")).toEqual([]);
    expect(await ids("q=LOCTAG")).toEqual([]);
  });

  it("merges name/key matches and tag-only matches in one order, with paging and total_count", async () => {
    // "lic": asset 1 by name (Hydraulic Pump), asset 5 by a tag value only.
    expect((await report(a.auth, "q=LIC")).json()).toMatchObject({ total_count: 2, data: [{ asset_id: 5 }, { asset_id: 1 }] });
    expect(await ids("q=lic&sort=asset_last_seen")).toEqual([1, 5]);
    expect(await ids("q=lic&sort=-asset_external_key")).toEqual([5, 1]);
    expect(await ids("q=lic&limit=1&offset=1")).toEqual([1]);
    expect((await report(a.auth, "q=lic&offset=2")).json()).toMatchObject({ total_count: 2, data: [] });
    expect(await ids("q=lic&location_external_key=ROOM-5")).toEqual([5]);
  });

  it("treats % and _ literally and combines with filters and total_count", async () => {
    expect(await ids(`q=${encodeURIComponent("%")}`)).toEqual([10]);
    expect(await ids("q=_")).toEqual([10]);
    expect(await ids("q=nothing-matches-this")).toEqual([]);
    const res = await report(a.auth, "q=pump&location_id=101");
    expect(res.json()).toMatchObject({ total_count: 1, data: [{ asset_id: 1 }] });
  });
});

describe("sort and paging", () => {
  it("sorts by asset_external_key, asset_last_seen and location_external_key, asset_id last", async () => {
    expect(await ids("sort=asset_external_key")).toEqual([3, 4, 10, 1, 2, 5]);
    expect(await ids("sort=-asset_external_key")).toEqual([5, 2, 1, 10, 4, 3]);
    expect(await ids("sort=asset_last_seen")).toEqual([1, 2, 3, 4, 5, 10]);
    expect(await ids("sort=-asset_last_seen")).toEqual([10, 5, 4, 3, 2, 1]);
    // Null keys (soft-deleted or not-effective location) sort last ascending, first descending.
    expect(await ids("sort=location_external_key")).toEqual([1, 5, 10, 2, 3, 4]);
    expect(await ids("sort=-location_external_key")).toEqual([4, 3, 2, 10, 5, 1]);
    expect(await ids("sort=location_external_key,-asset_last_seen")).toEqual([1, 10, 5, 4, 3, 2]);
  });

  it("pages with limit and offset; total_count covers every page", async () => {
    expect((await report(a.auth, "limit=2")).json()).toMatchObject({ limit: 2, offset: 0, total_count: 6 });
    expect(await ids("limit=2")).toEqual([10, 5]);
    expect(await ids("limit=2&offset=4")).toEqual([2, 1]);
    const past = (await report(a.auth, "offset=10")).json();
    expect(past).toEqual({ data: [], limit: 50, offset: 10, total_count: 6 });
    expect((await report(a.auth, "limit=200")).json().limit).toBe(200);
  });

  it("answers HEAD like GET, without a body", async () => {
    const res = await stack.gateway.inject({ method: "HEAD", url: "/api/v1/reports/asset-locations", headers: a.auth });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe("");
  });
});

describe("organization isolation", () => {
  it("every row, filter and search stays inside the caller's organization", async () => {
    const rowsB = (await report(b.auth, "include_deleted=true&limit=200")).json();
    expect(rowsB.total_count).toBe(2);
    expect(rowsB.data).toEqual([
      expect.objectContaining({ asset_id: 12, asset_external_key: "PUMP-1", location_id: 101, location_external_key: "B-DOCK" }),
      expect.objectContaining({ asset_id: 1, asset_external_key: "B-ASSET-1", location_id: 101, location_external_key: "B-DOCK" }),
    ]);
    expect(await ids("asset_id=5", b.auth)).toEqual([]);
    expect(await ids("location_external_key=DOCK-1", b.auth)).toEqual([]);
    expect(await ids("q=hydraulic", b.auth)).toEqual([1]);
    expect(await ids("q=hydraulic")).toEqual([1]);
    expect((await report(a.auth, "asset_id=1")).json().data[0].asset_external_key).toBe("PUMP-1");
    expect(await ids("asset_external_key=B-ASSET-1")).toEqual([]);
  });
});
