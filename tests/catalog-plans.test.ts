/**
 * Plans that do not depend on statistics: on a catalog nobody has analyzed
 * (autovacuum off, or right after a large import), a record read still goes
 * through the primary key and the owner index, never through a walk of every
 * tag of the organization. Checked with EXPLAIN on the statements the stores
 * really run.
 */
import type pg from "pg";
import { createPool } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { seedUnanalyzedCatalog } from "./unanalyzed-catalog.ts";
import { applyPositions, ASSET_LIST, findAsset, lockAsset, type AssetFilters } from "../services/catalog/src/assets/asset-store.ts";
import { findLocation, LOCATION_LIST, type LocationFilters } from "../services/catalog/src/locations/location-store.ts";
import type { Db } from "../services/catalog/src/db/catalog-db.ts";
import { createCountCache } from "../services/catalog/src/requests/count-cache.ts";
import { createPageCache } from "../services/catalog/src/requests/page-cache.ts";
import { listRecords, type RecordList } from "../services/catalog/src/requests/list-query.ts";
import { relayClaimSql } from "../services/catalog/src/events/event-outbox.ts";

let db: TestDatabase;
let pool: pg.Pool;

type PlanNode = Record<string, unknown>;

/** Every node of an EXPLAIN (FORMAT JSON) plan, the root first. */
function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...((node.Plans as PlanNode[] | undefined) ?? []).flatMap(planNodes)];
}

/** Runs EXPLAIN on whatever statement the store sends, and keeps the plan's index names. */
function explaining(): { db: Db; indexes: () => string[] } {
  const found: string[] = [];
  const spy = {
    query: async (config: { text: string; values?: unknown[] } | string, values?: unknown[]) => {
      const text = typeof config === "string" ? config : config.text;
      const params = typeof config === "string" ? values : config.values;
      const result = await pool.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
      for (const node of planNodes(result.rows[0]!["QUERY PLAN"][0]!.Plan)) {
        if (typeof node["Index Name"] === "string") found.push(node["Index Name"]);
        if (node["Node Type"] === "Seq Scan") found.push(`seq:${String(node["Relation Name"])}`);
      }
      return { rows: [], rowCount: 0 };
    },
  };
  return { db: spy as unknown as Db, indexes: () => found };
}

/** As explaining, but each statement also runs (its rows returned): for a store that reads what it sends before. */
function explainingAndRunning(): { db: Db; indexes: () => string[] } {
  const plan = explaining();
  const spy = {
    query: async (config: { text: string; values?: unknown[] }) => {
      await (plan.db as unknown as typeof spy).query(config);
      return pool.query(config.text, config.values);
    },
  };
  return { db: spy as unknown as Db, indexes: plan.indexes };
}

/**
 * Lists page one of `q` for each pattern on the connection `one` and checks it
 * against the rule written plainly (name, external key, description or a live,
 * active tag value; case-insensitive substring), key for key and in count.
 */
async function expectSearchFollowsRule<F extends { q: string | undefined }, S extends string>(
  one: pg.Pool,
  list: RecordList<F, S>,
  filters: F,
  ownerType: "asset" | "location",
  patterns: string[],
  caches?: Parameters<typeof listRecords>[6],
): Promise<void> {
  for (const q of patterns) {
    const page = await listRecords(one, list, 1, { ...filters, q }, [{ field: "external_key" as S, descending: false }], { limit: 50, offset: 0 }, caches);
    const { rows: expected } = await pool.query<{ keys: string[]; n: number }>(
      `SELECT (array_agg(external_key ORDER BY external_key, id))[1:50] AS keys, count(*)::int AS n FROM ${list.table} r
        WHERE org_id = 1 AND (name ILIKE $1 OR external_key ILIKE $1 OR description ILIKE $1
              OR EXISTS (SELECT 1 FROM catalog.tags t WHERE t.owner_type = '${ownerType}' AND t.owner_id = r.id
                                                        AND t.deleted_at IS NULL AND t.is_active AND t.value ILIKE $1))`,
      [`%${q}%`],
    );
    expect(page.total).toBe(expected[0]!.n);
    expect(page.total).toBeGreaterThan(0);
    expect((JSON.parse(page.data) as Array<{ external_key: string }>).map((r) => r.external_key)).toEqual(expected[0]!.keys);
  }
}

/** The search statement prepared on `one`: Postgres tries five custom plans, then keeps the generic one. */
async function expectSearchOnGenericPlan(one: pg.Pool): Promise<string> {
  const { rows } = await one.query<{ name: string; generic_plans: string; custom_plans: string }>(
    "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%hits AS MATERIALIZED%'",
  );
  expect(rows).toHaveLength(1);
  expect(Number(rows[0]!.custom_plans)).toBeLessThanOrEqual(5);
  expect(Number(rows[0]!.generic_plans)).toBeGreaterThanOrEqual(3);
  return rows[0]!.name;
}

beforeAll(async () => {
  db = await createMigratedDatabase("catalog_plans");
  pool = createPool(db.url, 2);
  // A large import: thousands of assets, each with a tag, in one organization
  // (and a few in another), and no ANALYZE since.
  const unanalyzed = await seedUnanalyzedCatalog(pool, {
    locations: 500,
    assets: 8000,
    positioned: "true",
    tagged: "true",
    minModified: 7000,
    extra: `INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from)
            SELECT 1, 'location', l.id, 'barcode', 'LOCBC-' || l.id, now() FROM catalog.locations l;`,
  });
  expect(unanalyzed).toBe(3);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe("never-analyzed catalog", () => {
  it("reads an asset by id through the primary key and its tags through the owner index", async () => {
    const plan = explaining();
    await findAsset(plan.db, 1, 4321);
    expect(plan.indexes()).toContain("assets_pkey");
    expect(plan.indexes()).toContain("asset_positions_pkey");
    expect(plan.indexes()).toContain("tags_org_id_owner_type_owner_id_idx");
    expect(plan.indexes()).not.toContain("tags_org_id_tag_type_value_live_key");
    expect(plan.indexes().filter((i) => i.startsWith("seq:"))).toEqual([]);
  });

  it("locks an asset for a write the same way", async () => {
    const plan = explaining();
    await lockAsset(plan.db, 1, 4321);
    expect(plan.indexes()).toContain("assets_pkey");
    expect(plan.indexes()).toContain("tags_org_id_owner_type_owner_id_idx");
    expect(plan.indexes().filter((i) => i.startsWith("seq:"))).toEqual([]);
  });

  it("renders a whole-organization page for the page cache with its tags' validity through the owner index", async () => {
    const everything: AssetFilters = { externalKeys: [], locationIds: [], locationKeys: [], isActive: undefined, includeDeleted: false, q: undefined };
    const plan = explainingAndRunning();
    const page = await listRecords(plan.db, ASSET_LIST, 1, everything, [{ field: "name", descending: false }], { limit: 50, offset: 100 }, {
      cache: createCountCache(),
      pages: createPageCache(),
      catalogSeq: 1,
    });
    expect(JSON.parse(page.data)).toHaveLength(50);
    expect(plan.indexes()).toContain("tags_org_id_owner_type_owner_id_idx");
    expect(plan.indexes()).not.toContain("tags_org_id_tag_type_value_live_key");
    expect(plan.indexes().filter((i) => i.startsWith("seq:"))).toEqual([]);
  });

  it("reads a location by id through the primary key and the owner index", async () => {
    const plan = explaining();
    await findLocation(plan.db, 1, 250);
    expect(plan.indexes()).toContain("locations_pkey");
    expect(plan.indexes()).toContain("tags_org_id_owner_type_owner_id_idx");
    expect(plan.indexes().filter((i) => i.startsWith("seq:"))).toEqual([]);
  });
});

describe("list pages", () => {
  const everything: AssetFilters = { externalKeys: [], locationIds: [], locationKeys: [], isActive: undefined, includeDeleted: false, q: undefined };

  // Planning the render (a view with embedded tags) cost about as much as running it:
  // with the page's LIMIT and OFFSET inside it, Postgres re-planned it for every page.
  it("render their records through one generic plan on a connection, whatever the page", async () => {
    // Analyzed (the never-analyzed reads above are done): the planner's estimates are real ones.
    await pool.query("ANALYZE catalog.assets, catalog.tags, catalog.asset_positions, catalog.locations");
    const one = createPool(db.url, 1);
    try {
      const counts = createCountCache();
      const seen = new Set<string>();
      for (let n = 0; n < 8; n++) {
        const page = await listRecords(one, ASSET_LIST, 1, everything, [{ field: "external_key", descending: false }], { limit: 50, offset: n * 50 }, { cache: counts, catalogSeq: undefined });
        const records = JSON.parse(page.data) as Array<{ external_key: string; tags: unknown[] }>;
        expect(records).toHaveLength(50);
        expect(records.every((r) => r.tags.length === 1)).toBe(true);
        for (const r of records) seen.add(r.external_key);
        expect(page.total).toBe(7840);
      }
      expect(seen.size).toBe(400);
      const { rows } = await one.query<{ generic_plans: string; custom_plans: string }>(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%string_agg%page_ids%'",
      );
      expect(rows).toHaveLength(1);
      // Postgres tries a custom plan for the first five executions, then keeps the generic one.
      expect(Number(rows[0]!.custom_plans)).toBeLessThanOrEqual(5);
      expect(Number(rows[0]!.generic_plans)).toBeGreaterThanOrEqual(3);
    } finally {
      await one.end();
    }
  });

  // Planned for each pattern, a search spent a third of its Postgres time planning; on the
  // generic plan, a semi-join estimated at 400 matches became a hash join over every asset.
  // Each searched column reads its matches through its own trigram index, and the list's
  // conditions are tested on the rows fetched there (not fetched again by primary key).
  it("search with `q` through one generic plan that reads each column's matches through its trigram index, whatever the pattern", async () => {
    const one = createPool(db.url, 1);
    try {
      // Descriptions are searched too (a few assets have one); an inactive tag's value is not.
      await pool.query(`UPDATE catalog.assets SET description = 'Stored in bay ' || id WHERE id % 97 = 0`);
      await pool.query(`INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, is_active, valid_from)
                        SELECT 1, 'asset', id, 'ble', 'OFF-A-1', false, now() FROM catalog.assets WHERE external_key = 'A-2'`);
      await expectSearchFollowsRule(one, ASSET_LIST, everything, "asset", ["Asset 12", "asset 37", "IN BAY 1", "E28000000", "a-7", "Asset 4", "set 99", "A-1"]);
      const name = await expectSearchOnGenericPlan(one);
      // The plan the statement now keeps: no sequential scan, each column's matches through its trigram index.
      const { rows: plan } = await one.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE "${name}"(1, 50, 0, '%asset 1%')`);
      const nodes = planNodes(plan[0]!["QUERY PLAN"][0]!.Plan);
      expect(nodes.filter((n) => n["Node Type"] === "Seq Scan")).toEqual([]);
      const trigramScans = nodes.filter((n) => n["Node Type"] === "Bitmap Index Scan").map((n) => n["Index Name"]);
      expect(trigramScans.sort()).toEqual(["assets_description_trgm_idx", "assets_external_key_trgm_idx", "assets_name_trgm_idx", "tags_value_trgm_idx"]);
      // The matches are not fetched a second time, by primary key from their array.
      expect(nodes.filter((n) => n["Index Name"] === "assets_pkey" && String(n["Index Cond"]).includes("ANY"))).toEqual([]);
    } finally {
      await one.end();
    }
  });

  // A gateway read (with its watermark) may serve the search's page again: the statement then
  // also reads when a tag its pattern matches next changes validity, through the same index.
  it("search for the page cache the same way, with the matching tags' next boundary through the tags' trigram index", async () => {
    const one = createPool(db.url, 1);
    try {
      const caches = { cache: createCountCache(), pages: createPageCache(), catalogSeq: 1 };
      await expectSearchFollowsRule(one, ASSET_LIST, everything, "asset", ["Asset 12", "asset 37", "IN BAY 1", "E28000000", "a-7", "Asset 4", "set 99", "A-1"], caches);
      const name = await expectSearchOnGenericPlan(one);
      const { rows: plan } = await one.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE "${name}"(1, 50, 0, '%asset 1%', 1)`);
      const nodes = planNodes(plan[0]!["QUERY PLAN"][0]!.Plan);
      expect(nodes.filter((n) => n["Node Type"] === "Seq Scan")).toEqual([]);
      const trigramScans = nodes.filter((n) => n["Node Type"] === "Bitmap Index Scan").map((n) => n["Index Name"]);
      expect(trigramScans.sort()).toEqual(["assets_description_trgm_idx", "assets_external_key_trgm_idx", "assets_name_trgm_idx", "tags_value_trgm_idx", "tags_value_trgm_idx"]);
    } finally {
      await one.end();
    }
  });

  it("search locations with `q` the same way: the rule's matches, one generic plan", async () => {
    const one = createPool(db.url, 1);
    try {
      const all: LocationFilters = { externalKeys: [], parentIds: [], parentKeys: [], isActive: undefined, isZone: undefined, includeDeleted: false, q: undefined };
      // A few rare names among the 500: patterns the planner would estimate one by one.
      await pool.query(`INSERT INTO catalog.locations (org_id, external_key, name, valid_from)
                        SELECT 1, 'QZ-' || g, 'Quartz dock ' || g, now() FROM generate_series(1, 12) g`);
      await pool.query("ANALYZE catalog.locations");
      await expectSearchFollowsRule(one, LOCATION_LIST, all, "location", ["quartz dock 1", "uartz dock 2", "QZ-3", "Quartz", "dock 11", "qz-1", "artz d", "z dock 5"]);
      await expectSearchOnGenericPlan(one);
    } finally {
      await one.end();
    }
  });
});

describe("a scan batch's positions", () => {
  // Moves from tracking: each asset is checked against this organization by its key. As a join,
  // a batch of 450 hashed every asset of the catalog.
  it("are applied by primary key, and only to this organization's assets", async () => {
    const { rows: assets } = await pool.query<{ id: number; org_id: number }>(
      `SELECT id, org_id FROM catalog.assets WHERE id % 17 = 0 ORDER BY id LIMIT 450`,
    );
    expect(assets.some((a) => a.org_id === 2)).toBe(true);
    // Every event claims organization 1: those for organization 2's assets must change nothing.
    const events = assets.map((a, i) => ({
      version: 1 as const,
      event_id: `moved:1:${a.id}:9`,
      org_id: 1,
      asset_id: a.id,
      location_id: 1 + (i % 500),
      observed_at: "2030-01-01T00:00:00.000000Z",
      seq: 9,
    }));
    const plan = explaining();
    await applyPositions(plan.db, events);
    expect(plan.indexes()).toContain("assets_pkey");
    expect(plan.indexes().filter((i) => i.startsWith("seq:"))).toEqual([]);

    await applyPositions(pool as unknown as Db, events);
    const { rows } = await pool.query<{ asset_id: number; org_id: number; location_id: number; moved: boolean }>(
      `SELECT p.asset_id, p.org_id, p.location_id, p.observed_at = '2030-01-01Z' AS moved
         FROM catalog.asset_positions p WHERE p.asset_id = ANY ($1::int[]) ORDER BY p.asset_id`,
      [assets.map((a) => a.id)],
    );
    expect(rows).toEqual(
      events.filter((_, i) => assets[i]!.org_id === 1).map((e) => ({ asset_id: e.asset_id, org_id: 1, location_id: e.location_id, moved: true })),
    );
  });
});

describe("the outbox relay's claim", () => {
  // Analyzed when every row was published (as after a burst of API writes), then a bulk job's
  // backlog arrives: the planner believes there is no unpublished row at all.
  it("reads its candidates once and marks them by primary key, whatever the statistics believe", async () => {
    await pool.query(`
      INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload, published_at)
      SELECT 'published-' || g, 1, 'catalog.events.1.asset.created', '{}', now() FROM generate_series(1, 20000) g;
      ANALYZE catalog.outbox_events;
      INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload)
      SELECT 'backlog-' || g, 1, 'catalog.events.1.asset.created', '{}' FROM generate_series(1, 1500) g;`);
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const { rows } = await client.query<{ "QUERY PLAN": Array<{ Plan: Record<string, unknown> }> }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${relayClaimSql(0, "0", 2 * 1024 * 1024)}`,
      );
      await client.query("ROLLBACK");
      const plan = rows[0]!["QUERY PLAN"][0]!.Plan;
      const nodes: Array<Record<string, unknown>> = [];
      const walk = (node: Record<string, unknown>) => {
        nodes.push(node);
        for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
      };
      walk(plan);
      // A batch claimed: RELAY_BATCH rows of the backlog.
      expect(plan["Actual Rows"]).toBe(1000);
      // The unpublished rows are scanned once (the inlined form rescanned them once per unpublished row),
      // and nothing reads the whole table.
      const candidateScans = nodes.filter((n) => String(n["Index Cond"] ?? "").includes("id >"));
      expect(candidateScans.map((n) => [n["Index Name"], n["Actual Loops"]])).toEqual([["outbox_events_unpublished_idx", 1]]);
      // Each candidate is then found by its id alone.
      const lookups = nodes.filter((n) => typeof n["Index Name"] === "string" && !String(n["Index Cond"] ?? "").includes("id >"));
      expect(lookups.length).toBeGreaterThan(0);
      for (const n of lookups) expect(String(n["Index Cond"])).toMatch(/^\(id = /);
      expect(nodes.filter((n) => n["Node Type"] === "Seq Scan")).toEqual([]);
    } finally {
      client.release();
    }
  });
});
