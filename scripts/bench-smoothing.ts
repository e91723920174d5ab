/**
 * Smoothing at the store (EXTENSIONS.md section 5), tracking's transaction
 * alone: a fresh database with 20,000 placed assets, then batches of 5,000
 * reads of random assets at the place they are at (the steady mix's repeat
 * reads; every one inside a 60 s window, so smoothing suppresses each), timed
 * with smoothing off and on, alternating. Prints microseconds per read for
 * the whole transaction (decision, positions, history) and for the smoothing
 * decision alone: what smoothing saves (the history rows) against what it
 * costs (reading the positions and deciding).
 *
 *   npx tsx scripts/bench-smoothing.ts [--rounds 3] [--batches 20]
 *
 * Needs Postgres (DATABASE_URL's server).
 */
import { parseArgs } from "node:util";
import { createTestDatabase } from "@whereabouts/shared/testing";
import { migrateAll } from "./migrate.ts";
import { createTrackingClient, inTransaction, query } from "../services/tracking/src/db/tracking-db.ts";
import { recordScans, type ScanRow } from "../services/tracking/src/scans/scan-store.ts";
import { createSmoother } from "../services/tracking/src/scans/smoothing.ts";

const { values: args } = parseArgs({ options: { rounds: { type: "string", default: "3" }, batches: { type: "string", default: "20" } } });
const ASSETS = 20_000;
const BATCH = 5_000;
const ORG = 1;

const database = await createTestDatabase("bench_smoothing", { prefix: "wa_bench_" });
const db = createTrackingClient(database.url, 2);
try {
  await migrateAll({ DATABASE_URL: database.url }, () => undefined);
  await query(db, `INSERT INTO tracking.orgs (id, smoothing_window_s) VALUES ($1, 0)`, [ORG]);
  let clock = Date.parse("2026-11-27T08:00:00Z");
  let ord = 0;
  const placeOf = (assetId: number) => 1 + (assetId % 100);
  const read = (assetId: number): ScanRow => {
    const ms = clock++;
    return { orgId: ORG, assetId, observedAt: new Date(ms).toISOString(), observedUs: ms * 1000, locationId: placeOf(assetId), ord: ord++, keep: true };
  };
  for (let first = 1; first <= ASSETS; first += BATCH) {
    const rows = Array.from({ length: BATCH }, (_, i) => read(first + i));
    await inTransaction(db, (tx) => recordScans(tx, rows));
  }
  await query(db, "ANALYZE tracking.positions");

  const smoother = createSmoother();
  async function run(windowS: number, locked = false): Promise<{ total: number; decision: number }> {
    await query(db, `UPDATE tracking.orgs SET smoothing_window_s = $2 WHERE id = $1`, [ORG, windowS]);
    let total = 0;
    let decision = 0;
    const batches = Number(args.batches);
    for (let b = 0; b < batches; b++) {
      const rows = Array.from({ length: BATCH }, () => read(1 + Math.floor(Math.random() * ASSETS)));
      const started = performance.now();
      await smoother.record((lockedRead) =>
        inTransaction(db, async (tx) => {
          await smoother.apply(tx, rows, { locked: lockedRead || locked, windows: new Map([[ORG, windowS]]) });
          decision += performance.now() - started;
          const recorded = await recordScans(tx, rows);
          smoother.check(recorded);
          return { recorded };
        }),
      );
      total += performance.now() - started;
    }
    const perRead = (ms: number) => (ms * 1000) / (batches * BATCH);
    return { total: perRead(total), decision: perRead(decision) };
  }

  const f = (n: number) => n.toFixed(1);
  for (let r = 1; r <= Number(args.rounds); r++) {
    const off = await run(0);
    const locked = await run(60, true);
    const remembered = await run(60);
    console.log(
      `round ${r}: µs per read, transaction: off ${f(off.total)}, on with positions read locked ${f(locked.total)} (${(off.total / locked.total).toFixed(2)}x the rate), ` +
        `on with positions remembered ${f(remembered.total)} (${(off.total / remembered.total).toFixed(2)}x); ` +
        `the smoothing decision: off ${f(off.decision)}, read locked ${f(locked.decision)}, remembered ${f(remembered.decision)}`,
    );
  }
} finally {
  await db.$disconnect();
  await database.drop();
}
