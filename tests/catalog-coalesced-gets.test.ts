/**
 * GETs by id read together (services/catalog/src/db/coalesced-finds.ts): the
 * statement for several ids answers each id exactly as the single-row
 * statement does (live, another organization's, soft-deleted, missing), the
 * asset service's concurrent GETs answer as sequential ones, and on a catalog
 * nobody has analyzed the statement still takes one primary-key lookup per id
 * and the owner index for tags, with custom and generic plans alike.
 */
import type pg from "pg";
import { createPool } from "@whereabouts/shared";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { seedUnanalyzedCatalog } from "./unanalyzed-catalog.ts";
import { createAssetService } from "../services/catalog/src/assets/asset-service.ts";
import { findAsset, findAssets } from "../services/catalog/src/assets/asset-store.ts";
import type { Db } from "../services/catalog/src/db/catalog-db.ts";
import type { EventPublisher } from "../services/catalog/src/events/event-outbox.ts";

let db: TestDatabase;
let pool: pg.Pool;
/** Ids by what they are to organization 1 (`live` includes an expired asset and one not yet valid, both inactive). */
const ids = { live: [] as number[], expired: 0, notYetValid: 0, otherOrg: 0, deleted: 0, missing: 999_999 };

beforeAll(async () => {
  db = await createMigratedDatabase("catalog_coalesced_gets");
  pool = createPool(db.url, 3);
  await seedUnanalyzedCatalog(pool, { locations: 500, assets: 3000, positioned: "a.id % 3 = 0", tagged: "a.id % 2 = 0", minModified: 500 });
  const { rows } = await pool.query<{ id: number; org_id: number }>("SELECT id, org_id FROM catalog.assets ORDER BY id LIMIT 60");
  ids.live = rows.filter((r) => r.org_id === 1).map((r) => r.id).slice(0, 12);
  ids.otherOrg = rows.find((r) => r.org_id === 2)!.id;
  ids.deleted = ids.live.pop()!;
  await pool.query("UPDATE catalog.assets SET deleted_at = now() WHERE id = $1", [ids.deleted]);
  // Visibility rule 3: a read by id skips the currently-effective predicate, so these are answered like any live row.
  [ids.expired, ids.notYetValid] = [ids.live[0]!, ids.live[1]!];
  await pool.query("UPDATE catalog.assets SET valid_to = now() - interval '1 day', is_active = false WHERE id = $1", [ids.expired]);
  await pool.query("UPDATE catalog.assets SET valid_from = now() + interval '1 day', is_active = false WHERE id = $1", [ids.notYetValid]);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe("reading several assets by id in one statement", () => {
  it("answers each id as the single-row read does", async () => {
    const asked = [...ids.live, ids.otherOrg, ids.deleted, ids.missing];
    const many = await findAssets(pool, 1, asked);
    for (const id of asked) expect(many.get(id)).toEqual(await findAsset(pool, 1, id));
    expect([...many.keys()].sort((a, b) => a - b)).toEqual([...ids.live].sort((a, b) => a - b));
    expect(JSON.parse(many.get(ids.expired)!)).toMatchObject({ id: ids.expired, is_active: false, valid_to: expect.any(String) });
    expect(JSON.parse(many.get(ids.notYetValid)!)).toMatchObject({ id: ids.notYetValid, is_active: false });
    // The views are whole records, tags and location included where there are any.
    const views = ids.live.map((id) => JSON.parse(many.get(id)!) as { id: number; tags: unknown[]; location_id: number | null });
    expect(views.map((v) => v.id)).toEqual(ids.live);
    expect(views.some((v) => v.tags.length === 1) && views.some((v) => v.tags.length === 0)).toBe(true);
    expect(views.some((v) => v.location_id !== null) && views.some((v) => v.location_id === null)).toBe(true);
  });

  it("lets the asset service's concurrent GETs answer as sequential ones, 404s included", async () => {
    const service = createAssetService({ events: {} as EventPublisher, db: pool });
    const asked = [...ids.live, ids.live[0]!, ids.otherOrg, ids.deleted, ids.missing];
    const outcome = (p: Promise<unknown>) =>
      p.then(
        (body) => ({ body }),
        (err: { type?: string; detail?: string }) => ({ error: `${err.type}: ${err.detail}` }),
      );
    const sequential = [];
    for (const id of asked) sequential.push(await outcome(service.get(1, id)));
    const concurrent = await Promise.all(asked.map((id) => outcome(service.get(1, id))));
    expect(concurrent).toEqual(sequential);
    expect(concurrent.slice(-3)).toEqual([
      { error: `not_found: Asset ${ids.otherOrg} not found` },
      { error: `not_found: Asset ${ids.deleted} not found` },
      { error: `not_found: Asset ${ids.missing} not found` },
    ]);
  });

  it("takes one primary-key lookup per id and the owner index on a never-analyzed catalog, custom or generic plan", async () => {
    let statement: { text: string; values: unknown[] } | undefined;
    const capture = { query: async (config: { text: string; values: unknown[] }) => ((statement = config), { rows: [], rowCount: 0 }) };
    await findAssets(capture as unknown as Db, 1, ids.live);
    const client = await pool.connect();
    try {
      for (const mode of ["auto", "force_generic_plan"]) {
        await client.query(`SET plan_cache_mode = ${mode}`);
        await client.query(`PREPARE many AS ${statement!.text}`);
        const args = statement!.values.map((v) => client.escapeLiteral(String(v))).join(", ");
        const { rows } = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN (COSTS OFF) EXECUTE many(${args})`);
        await client.query("DEALLOCATE many");
        const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
        expect(plan, mode).toMatch(/Index Scan using assets_pkey on assets\s+Index Cond: \(id = k\.id\)/);
        expect(plan, mode).toContain("Index Scan using asset_positions_pkey");
        expect(plan, mode).toContain("Index Scan using tags_org_id_owner_type_owner_id_idx");
        expect(plan, mode).not.toContain("Seq Scan");
        expect(plan, mode).not.toContain("Hash");
      }
    } finally {
      await client.query("RESET plan_cache_mode");
      client.release();
    }
  });
});
