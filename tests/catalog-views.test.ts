/**
 * A record view is written once (its fields) and rendered two ways: as a
 * `json` value (what the service reads back and events carry) and as JSON
 * text by concatenation (what a GET, a list page and the export send as they
 * are). Both must say exactly the same thing for any stored value: quotes,
 * backslashes, control characters, non-ASCII, nulls, nested metadata, tags.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool } from "@whereabouts/shared";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { ASSET_LIST, findAsset, loadAsset, type AssetFilters } from "../services/catalog/src/assets/asset-store.ts";
import { findLocation, loadLocation, LOCATION_LIST, type LocationFilters } from "../services/catalog/src/locations/location-store.ts";
import { findScanPoint, loadScanPoint } from "../services/catalog/src/scan-points/scan-point-store.ts";
import { listRecords } from "../services/catalog/src/requests/list-query.ts";

let db: TestDatabase;
let pool: pg.Pool;
const TRICKY = `quote " backslash \\ slash / tab \t newline \n bell \u0007 nul-free é 漢字 😀 {"not":"json"}`;
let ids: { asset: number; bare: number; location: number; child: number; scanPoint: number };

beforeAll(async () => {
  db = await createMigratedDatabase("catalog_views");
  pool = createPool(db.url, 2);
  const one = async (sql: string, values: unknown[]) => (await pool.query<{ id: number }>(sql, values)).rows[0]!.id;
  const location = await one(
    `INSERT INTO catalog.locations (org_id, external_key, name, description, valid_from, is_zone, max_dwell_s) VALUES (1, $1, $2, $3, now(), true, 3600) RETURNING id`,
    ["LOC-\"1\"", TRICKY, null],
  );
  const child = await one(
    `INSERT INTO catalog.locations (org_id, external_key, name, description, parent_id, valid_from, valid_to) VALUES (1, 'LOC-2', 'Child', $1, $2, '2020-01-01T00:00:00.123456Z', '2999-12-31T23:59:59.999Z') RETURNING id`,
    [TRICKY, location],
  );
  const asset = await one(
    `INSERT INTO catalog.assets (org_id, external_key, name, description, is_active, metadata, valid_from) VALUES (1, $1, $2, $3, false, $4::jsonb, now()) RETURNING id`,
    ["A-\\1", TRICKY, TRICKY, JSON.stringify({ nested: { list: [1, 2.5, -3e-7, null, true], text: TRICKY }, empty: {}, "key \"q\"": "v" })],
  );
  const bare = await one(`INSERT INTO catalog.assets (org_id, external_key, name, valid_from) VALUES (1, 'A-2', 'Bare', now()) RETURNING id`, []);
  await pool.query(`INSERT INTO catalog.asset_positions (asset_id, org_id, location_id, observed_at, seq) VALUES ($1, 1, $2, now(), 1)`, [asset, location]);
  for (const [owner, type, value] of [[asset, "rfid", TRICKY], [asset, "ble", "B-1"], [child, "barcode", "LOC\"BC"]] as const) {
    await pool.query(
      `INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from) VALUES (1, $1, $2, $3, $4, now())`,
      [owner === child ? "location" : "asset", owner, type, value],
    );
  }
  const scanPoint = await one(`INSERT INTO catalog.scan_points (org_id, source, antenna, location_id, valid_from) VALUES (1, $1, NULL, $2, now()) RETURNING id`, [TRICKY, location]);
  ids = { asset, bare, location, child, scanPoint };
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe("record views as JSON text", () => {
  it("say exactly what the json views say, for assets, locations and scan points", async () => {
    for (const [find, load, id] of [
      [findAsset, loadAsset, ids.asset],
      [findAsset, loadAsset, ids.bare],
      [findLocation, loadLocation, ids.location],
      [findLocation, loadLocation, ids.child],
      [findScanPoint, loadScanPoint, ids.scanPoint],
    ] as const) {
      const text = await find(pool, 1, id);
      const { view } = await load(pool, 1, id);
      expect(JSON.parse(text!)).toStrictEqual(view);
    }
    const asset = JSON.parse((await findAsset(pool, 1, ids.asset))!) as Record<string, unknown>;
    // The values themselves, not only their agreement.
    expect(asset.name).toBe(TRICKY);
    expect(asset.is_active).toBe(false);
    expect(asset.location_external_key).toBe('LOC-"1"');
    expect((asset.tags as Array<{ value: string }>).map((t) => t.value)).toEqual([TRICKY, "B-1"]);
    expect(JSON.parse((await findAsset(pool, 1, ids.bare))!)).toMatchObject({ description: null, location_id: null, location_external_key: null, tags: [] });
    expect(JSON.parse((await findLocation(pool, 1, ids.child))!)).toMatchObject({ valid_from: "2020-01-01T00:00:00.123Z", valid_to: "2999-12-31T23:59:59.999Z", parent_external_key: 'LOC-"1"' });
  });

  it("render list pages the same way", async () => {
    const assets: AssetFilters = { externalKeys: [], locationIds: [], locationKeys: [], isActive: undefined, includeDeleted: false, q: undefined };
    const page = await listRecords(pool, ASSET_LIST, 1, assets, [{ field: "external_key", descending: false }], { limit: 10, offset: 0 });
    // By external key in byte order: "A-2" before "A-\\1".
    expect(JSON.parse(page.data)).toStrictEqual([(await loadAsset(pool, 1, ids.bare)).view, (await loadAsset(pool, 1, ids.asset)).view]);
    const locations: LocationFilters = { externalKeys: [], parentIds: [], parentKeys: [], isActive: undefined, isZone: undefined, includeDeleted: false, q: undefined };
    const located = await listRecords(pool, LOCATION_LIST, 1, locations, [{ field: "name", descending: true }], { limit: 10, offset: 0 });
    expect(JSON.parse(located.data)).toStrictEqual([(await loadLocation(pool, 1, ids.location)).view, (await loadLocation(pool, 1, ids.child)).view]);
  });
});
