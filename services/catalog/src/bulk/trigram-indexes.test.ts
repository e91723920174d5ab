/**
 * Deferring the trigram indexes beside a reader that has planned on both
 * tables: the reader holds the tags' index locks and then needs the assets'
 * ones. Switching the four indexes in one transaction held the assets' locks
 * while waiting for the tags' one: a deadlock, one side killed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { createPool, sqlQuery } from "@whereabouts/shared";
import { eventually, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import {
  BULK_PENDING_LIST_KB,
  BULK_TRIGRAM_INDEXES,
  deferTrigramIndexes,
  restoreTrigramIndexes,
  TRIGRAM_INDEX_OPTIONS,
  TRIGRAM_PENDING_LIST_KB,
} from "./trigram-indexes.ts";

let database: TestDatabase;
let pool: pg.Pool;
const logged: string[] = [];
const logger = { warn: (_: unknown, message: string) => void logged.push(message) } as never;

beforeAll(async () => {
  database = await createMigratedDatabase("catalog_trigram_defer");
  pool = createPool(database.url, 4);
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

/** The indexes whose pending list has the bulk job's limit. */
const deferredIndexes = async () =>
  (
    await sqlQuery<{ relname: string }>(
      pool,
      `SELECT c.relname FROM pg_class c WHERE c.oid = ANY($1::regclass[]) AND coalesce(c.reloptions, '{}') @> ARRAY[$2] ORDER BY 1`,
      [[...BULK_TRIGRAM_INDEXES], `gin_pending_list_limit=${BULK_PENDING_LIST_KB}`],
    )
  ).map((r) => r.relname);

/** Every trigram index of the catalog with its options (the q search's, locations' included). */
const trigramIndexOptions = async () =>
  sqlQuery<{ relname: string; reloptions: string[] | null }>(
    pool,
    `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'catalog' AND c.relname LIKE '%\\_trgm\\_idx' ORDER BY 1`,
  );

describe("the trigram indexes' pending list", () => {
  it("is on with the small limit on every trigram index after the migrations", async () => {
    const indexes = await trigramIndexOptions();
    expect(indexes.map((i) => i.relname)).toEqual([
      "assets_description_trgm_idx",
      "assets_external_key_trgm_idx",
      "assets_name_trgm_idx",
      "locations_description_trgm_idx",
      "locations_external_key_trgm_idx",
      "locations_name_trgm_idx",
      "tags_value_trgm_idx",
    ]);
    for (const index of indexes) expect([...(index.reloptions ?? [])].sort()).toEqual([...TRIGRAM_INDEX_OPTIONS].sort());
    expect(TRIGRAM_INDEX_OPTIONS).toContain(`gin_pending_list_limit=${TRIGRAM_PENDING_LIST_KB}`);
  });

  it("a search finds rows whose trigrams still wait in the pending list, and a merge keeps them found", async () => {
    const org = 901;
    await pool.query(
      `INSERT INTO catalog.assets (org_id, external_key, name, description, valid_from)
       SELECT $1, 'PENDING-' || g, 'Pending asset ' || g || CASE WHEN g % 10 = 0 THEN ' quokka' ELSE '' END, NULL, now()
         FROM generate_series(1, 30) g`,
      [org],
    );
    // Through the name's trigram index (a table this small would otherwise be read whole).
    const search = async () => {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query("SET LOCAL enable_seqscan = off");
        const sql = `SELECT count(*)::int AS n FROM catalog.assets WHERE name ILIKE '%quokka%'`;
        const plan = (await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`)).rows.map((r) => r["QUERY PLAN"]).join("\n");
        expect(plan).toContain("assets_name_trgm_idx");
        const n = (await client.query<{ n: number }>(sql)).rows[0]!.n;
        return n;
      } finally {
        await client.query("ROLLBACK");
        client.release();
      }
    };
    // 30 short names stay under the limit: the search above read them from the pending list (the merge finds pages to merge).
    expect(await search()).toBe(3);
    const merged = await sqlQuery<{ n: number }>(pool, `SELECT gin_clean_pending_list('catalog.assets_name_trgm_idx'::regclass)::int AS n`);
    expect(merged[0]!.n).toBeGreaterThan(0);
    expect(await search()).toBe(3);
    await pool.query(
      `INSERT INTO catalog.assets (org_id, external_key, name, description, valid_from)
       SELECT $1, 'PENDING-B' || g, 'Pending quokka ' || g, NULL, now() FROM generate_series(1, 4) g`,
      [org],
    );
    expect(await search()).toBe(7);
  });
});

describe("deferring the trigram indexes", () => {
  it("waits for a reader of both tables without deadlocking it, then defers all four; restoring turns them back", async () => {
    const reader = await pool.connect();
    try {
      await reader.query("BEGIN");
      // Planned on catalog.tags: every tags index is locked (ACCESS SHARE) until the reader ends.
      await reader.query("SELECT count(*) FROM catalog.tags WHERE org_id = 1");
      const deferring = deferTrigramIndexes(pool, logger);
      // The deferral is waiting for the tags' index (its lock_timeout is 2 s): the assets' are done.
      await eventually(async () => ((await deferredIndexes()).includes("assets_description_trgm_idx") ? true : undefined), 1500, 20);
      // The reader now needs the assets' indexes: nothing holds them.
      await reader.query("SELECT count(*) FROM catalog.assets WHERE org_id = 1");
      await reader.query("COMMIT");
      expect(await deferring).toBe(true);
    } finally {
      reader.release();
    }
    // The job's rows: their entries wait in the large pending list.
    await pool.query(
      `WITH a AS (
         INSERT INTO catalog.assets (org_id, external_key, name, description, valid_from)
         SELECT 902, 'DEFERRED-' || g, 'Deferred asset ' || g, 'row ' || g, now() FROM generate_series(1, 200) g RETURNING id, external_key)
       INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from)
       SELECT 902, 'asset', a.id, 'rfid', 'DEFERRED-T-' || a.external_key, now() FROM a`,
    );
    expect(logged).toEqual([]);
    expect(await deferredIndexes()).toEqual(["assets_description_trgm_idx", "assets_external_key_trgm_idx", "assets_name_trgm_idx", "tags_value_trgm_idx"]);
    expect(await restoreTrigramIndexes(pool, logger)).toBe(true);
    expect(await deferredIndexes()).toEqual([]);
    for (const index of await trigramIndexOptions()) expect([...(index.reloptions ?? [])].sort()).toEqual([...TRIGRAM_INDEX_OPTIONS].sort());
    // What the job left pending was merged: nothing left to clean.
    for (const index of BULK_TRIGRAM_INDEXES) {
      expect((await sqlQuery<{ n: number }>(pool, `SELECT gin_clean_pending_list($1::regclass)::int AS n`, [index]))[0]!.n).toBe(0);
    }
  });
});
