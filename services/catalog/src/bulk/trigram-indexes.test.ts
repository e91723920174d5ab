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
import { BULK_TRIGRAM_INDEXES, deferTrigramIndexes, restoreTrigramIndexes } from "./trigram-indexes.ts";

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

const deferredIndexes = async () =>
  (
    await sqlQuery<{ relname: string }>(
      pool,
      `SELECT c.relname FROM pg_class c WHERE c.oid = ANY($1::regclass[]) AND coalesce(c.reloptions, '{}') @> ARRAY['fastupdate=on'] ORDER BY 1`,
      [[...BULK_TRIGRAM_INDEXES]],
    )
  ).map((r) => r.relname);

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
    expect(logged).toEqual([]);
    expect(await deferredIndexes()).toEqual(["assets_description_trgm_idx", "assets_external_key_trgm_idx", "assets_name_trgm_idx", "tags_value_trgm_idx"]);
    expect(await restoreTrigramIndexes(pool, logger)).toBe(true);
    expect(await deferredIndexes()).toEqual([]);
  });
});
