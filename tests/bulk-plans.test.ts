/**
 * The bulk upload's per-chunk lookups (keys and tags already taken) go through
 * the unique indexes one key or pair at a time, whatever the statistics say.
 * The state here is the one a benchmark run met: the catalog analyzed while
 * empty, then 20,000 tagged assets seeded and not analyzed since. A plain
 * join of the chunk's pairs to the tags then read every tag of the
 * organization for every pair (4.9 s for one chunk). Checked with EXPLAIN on
 * the statements the lookups really send.
 */
import type pg from "pg";
import { createPool } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { explainPlan, type PlanNode, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { liveAssetsByKey, takenTags } from "../services/catalog/src/bulk/bulk-import.ts";
import type { Db } from "../services/catalog/src/db/catalog-db.ts";

let db: TestDatabase;
let pool: pg.Pool;

const explain = (text: string, values: unknown[]) => explainPlan(pool, text, values);

/** A Db that EXPLAINs whatever statement it is sent, and keeps the plan. */
function explaining(): { db: Db; plan: () => PlanNode[] } {
  let plan: PlanNode[] = [];
  const spy = {
    query: async (config: { text: string; values?: unknown[] } | string, values?: unknown[]) => {
      const text = typeof config === "string" ? config : config.text;
      plan = await explain(text, (typeof config === "string" ? values : config.values) ?? []);
      return { rows: [], rowCount: 0 };
    },
  };
  return { db: spy as unknown as Db, plan: () => plan };
}

const CHUNK = 2000;
const pairs = Array.from({ length: CHUNK }, (_, i) => `rfid:NEW-${i}`);
const keys = Array.from({ length: CHUNK }, (_, i) => `NEW-${i}`);

beforeAll(async () => {
  db = await createMigratedDatabase("bulk_plans");
  pool = createPool(db.url, 2);
  await pool.query(`ANALYZE catalog.assets; ANALYZE catalog.tags;`);
  await pool.query(`
    INSERT INTO catalog.assets (org_id, external_key, name, valid_from)
    SELECT 1, 'A-' || g, 'Asset ' || g, now() FROM generate_series(1, 20000) g;
    INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from)
    SELECT a.org_id, 'asset', a.id, 'rfid', 'E280' || lpad(a.id::text, 8, '0'), now() FROM catalog.assets a;`);
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe("bulk upload lookups on statistics older than the data", () => {
  it("the state is one where a plain join of the chunk's pairs reads every tag of the organization per pair", async () => {
    const plain = await explain(
      `SELECT t.value FROM unnest($2::text[], $3::text[]) AS p(tag_type, value)
         JOIN catalog.tags t ON t.org_id = $1 AND t.tag_type = p.tag_type AND t.value = p.value AND t.deleted_at IS NULL`,
      [1, pairs.map(() => "rfid"), pairs.map((p) => p.slice(5))],
    );
    const tagScans = plain.filter((n) => n["Relation Name"] === "tags");
    // Scanned by organization only (every tag of it), the pairs matched after.
    expect(tagScans.some((n) => !(n["Index Cond"] ?? "").includes("value"))).toBe(true);
  });

  // Each lookup, with the table it reads and the column its index condition must name (per key or pair, not per organization).
  const lookups = [
    { name: "each tag pair through the live (org, type, value) index", table: "tags", column: "value", run: (d: Db) => takenTags(d, 1, pairs) },
    { name: "each external key through the (org, external_key) index", table: "assets", column: "external_key", run: (d: Db) => liveAssetsByKey(d, 1, keys) },
  ];
  for (const lookup of lookups) {
    it(`looks ${lookup.name}`, async () => {
      const spy = explaining();
      await lookup.run(spy.db);
      const scans = spy.plan().filter((n) => n["Relation Name"] === lookup.table);
      expect(scans.length).toBeGreaterThan(0);
      for (const scan of scans) {
        expect(scan["Node Type"]).toMatch(/^Index( Only)? Scan$/);
        expect(scan["Index Cond"]).toContain(lookup.column);
      }
      expect(spy.plan().some((n) => n["Node Type"] === "Seq Scan")).toBe(false);
    });
  }
});
