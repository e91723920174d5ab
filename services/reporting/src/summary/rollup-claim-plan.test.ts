/**
 * The roll-up transitions' claim walks the `at` index whatever the statistics
 * say: the table analyzed with a few hundred rows left, then a backlog of
 * 200,000 due rows. Left to the planner, that state read and sorted every due
 * row for each batch. Checked with EXPLAIN on the claim the loop sends, under
 * the settings it sets around it.
 */
import type pg from "pg";
import { createPool } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { explainPlan, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { CLAIM_DUE_TRANSITIONS, CLAIM_PLANNER_SETTINGS } from "./rollup-transitions.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createMigratedDatabase("rollup_claim_plan");
  pool = createPool(db.url, 2);
  const fill = (from: number, to: number) =>
    pool.query(
      `INSERT INTO reporting.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
       SELECT 1, g, now() - interval '1 hour' + g * interval '1 ms', 1, 1 FROM generate_series($1::int, $2::int) g`,
      [from, to],
    );
  // Drained and analyzed with a few rows left spread over its pages, then a backlog.
  await fill(1, 100_000);
  await pool.query(`DELETE FROM reporting.location_rollup_transitions WHERE asset_id % 1000 <> 0`);
  await pool.query(`VACUUM ANALYZE reporting.location_rollup_transitions`);
  await fill(100_001, 300_000);
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function explainClaim(withSettings: boolean): Promise<string[]> {
  const settings = withSettings ? Object.fromEntries(CLAIM_PLANNER_SETTINGS.map((name) => [name, "off"])) : {};
  const plan = await explainPlan(pool, CLAIM_DUE_TRANSITIONS, [1000], settings);
  return plan.map((n) => (n["Index Name"] ? `${n["Node Type"]}:${n["Index Name"]}` : n["Node Type"]));
}

describe("the roll-up transitions' claim", () => {
  it("walks the `at` index on stale statistics, where the planner alone sorts every due row", async () => {
    expect(await explainClaim(false)).toContain("Sort");
    const walked = await explainClaim(true);
    expect(walked).toContain("Index Scan:location_rollup_transitions_at_idx");
    expect(walked.filter((n) => n === "Sort" || n === "Seq Scan" || n.startsWith("Bitmap"))).toEqual([]);
  });
});
