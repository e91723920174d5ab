/**
 * The webhook claim's scan (reporting.webhook_due_heads) walks the due index
 * in order whatever the statistics say. The queue is empty one moment and
 * holds a backlog the next, so its statistics are nearly always stale: here,
 * analyzed with a few dozen rows left and then filled with a backlog, the
 * state in which the planner on its own read the whole backlog and sorted it
 * (130 ms a claim in the webhooks benchmark). Checked with EXPLAIN on the
 * function's own statement, under the function's own settings.
 */
import type pg from "pg";
import { createPool } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { explainPlan, type PlanNode, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createMigratedDatabase("webhook_claim_plan");
  pool = createPool(db.url, 2);
  const fill = (from: number, to: number) =>
    pool.query(
      `INSERT INTO reporting.webhook_deliveries (webhook_id, org_id, event_seq, ordering_key, next_attempt_at)
       SELECT 1 + e % 100, 1, e, 'asset:' || (e % 5000), now() - interval '1 hour' + e * interval '1 ms'
         FROM generate_series($1::int, $2::int) e`,
      [from, to],
    );
  // A drained queue, analyzed: a few dozen rows left, spread over its pages (so vacuum cannot truncate them).
  await fill(1, 20_000);
  await pool.query(`DELETE FROM reporting.webhook_deliveries WHERE event_seq % 400 <> 0`);
  await pool.query(`VACUUM ANALYZE reporting.webhook_deliveries`);
  // Then a backlog, with the front of it in flight (leased).
  await fill(20_001, 70_000);
  await pool.query(`UPDATE reporting.webhook_deliveries SET lease_until = now() + interval '15 s' WHERE event_seq <= 1000`);
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** The function's statement, its parameters as $1/$2, explained with or without its planner settings. */
async function explainScan(withSettings: boolean): Promise<PlanNode[]> {
  const { rows } = await pool.query<{ src: string; config: string[] | null }>(
    `SELECT prosrc AS src, proconfig AS config FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = 'reporting' AND p.proname = 'webhook_due_heads'`,
  );
  expect(rows).toHaveLength(1);
  const { src, config } = rows[0]!;
  const statement = src.replace(/\bsaturated\b/g, "$1::int[]").replace(/\bmax_rows\b/g, "$2::int");
  if (withSettings) expect(config?.length).toBeGreaterThan(0);
  const settings = withSettings ? Object.fromEntries((config ?? []).map((setting) => setting.split("=") as [string, string])) : {};
  return explainPlan(pool, statement, [[], 400], settings);
}

describe("the webhook claim's scan", () => {
  it("walks the due index in order on stale statistics, where the planner alone reads the whole backlog", async () => {
    // The state is the one that went wrong: left to itself, the planner does not walk the due order.
    const unforced = await explainScan(false);
    const walks = (plan: PlanNode[]) =>
      plan.some((n) => n["Node Type"] === "Index Scan" && n["Index Name"] === "webhook_deliveries_due_idx" && n.Alias === "d") &&
      !plan.some((n) => n["Node Type"] === "Sort" || n["Node Type"] === "Seq Scan" || n["Node Type"].startsWith("Bitmap"));
    expect(walks(unforced)).toBe(false);

    const forced = await explainScan(true);
    expect(walks(forced)).toBe(true);
    // The chain check (per-asset order) is a lookup per row through the chain index, not a hash of the backlog.
    expect(forced.some((n) => n["Node Type"].startsWith("Index") && n["Index Name"] === "webhook_deliveries_chain_idx")).toBe(true);
    expect(forced.map((n) => n["Node Type"]).filter((t) => /Hash|Materialize|Merge/.test(t))).toEqual([]);
  });
});
