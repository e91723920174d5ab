/**
 * The bulk upload's per-chunk lookups (keys and tags already taken) go through
 * the unique indexes one key or pair at a time, whatever the statistics say.
 * The state here is the one a benchmark run met: the catalog analyzed while
 * empty, then 20,000 tagged assets seeded and not analyzed since. A plain
 * join of the chunk's pairs to the tags then read every tag of the
 * organization for every pair (4.9 s for one chunk). Checked with EXPLAIN on
 * the statements the lookups really send.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@whereabouts/shared/testing";
import { migrateAll } from "../scripts/migrate.ts";
import { liveAssetsByKey, takenTags } from "../services/catalog/src/bulk/bulk-import.ts";
import type { Db } from "../services/catalog/src/db/catalog-db.ts";

let db: TestDatabase;
let pool: pg.Pool;

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Index Cond"?: string;
  "Join Filter"?: string;
  "Relation Name"?: string;
  Plans?: PlanNode[];
}
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

async function explain(text: string, values: unknown[]): Promise<PlanNode[]> {
  const result = await pool.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
  return nodes(result.rows[0]!["QUERY PLAN"][0]!.Plan);
}

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
  db = await createTestDatabase("bulk_plans");
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
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

  it("looks each tag pair up through the live (org, type, value) index", async () => {
    const spy = explaining();
    await takenTags(spy.db, 1, pairs);
    const tagScans = spy.plan().filter((n) => n["Relation Name"] === "tags");
    expect(tagScans.length).toBeGreaterThan(0);
    for (const scan of tagScans) {
      expect(scan["Node Type"]).toMatch(/^Index( Only)? Scan$/);
      expect(scan["Index Cond"]).toContain("value");
    }
    expect(spy.plan().some((n) => n["Node Type"] === "Seq Scan")).toBe(false);
  });

  it("looks each external key up through the (org, external_key) index", async () => {
    const spy = explaining();
    await liveAssetsByKey(spy.db, 1, keys);
    const assetScans = spy.plan().filter((n) => n["Relation Name"] === "assets");
    expect(assetScans.length).toBeGreaterThan(0);
    for (const scan of assetScans) {
      expect(scan["Node Type"]).toMatch(/^Index( Only)? Scan$/);
      expect(scan["Index Cond"]).toContain("external_key");
    }
    expect(spy.plan().some((n) => n["Node Type"] === "Seq Scan")).toBe(false);
  });
});
