/**
 * The smoother against a real database: decisions on the positions it
 * remembers from its own batches are the decisions on the stored ones, and a
 * position another writer (a second tracking replica) changed meanwhile is
 * caught by the scan batch statement and decided again on locked rows.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { createTrackingClient, inTransaction, query, type TrackingClient } from "../db/tracking-db.ts";
import { recordScans, type ScanRow } from "./scan-store.ts";
import { createSmoother, type Smoother } from "./smoothing.ts";
import { scanRows } from "../testing/scan-rows.ts";

let database: TestDatabase;
let db: TrackingClient;
const SMOOTHED = 1;
const UNSMOOTHED = 2;
const { base, row: scanRow } = scanRows();

beforeAll(async () => {
  database = await createMigratedDatabase("tracking_smoothing");
  db = createTrackingClient(database.url, 2);
  await query(db, `INSERT INTO tracking.orgs (id, smoothing_window_s) VALUES ($1, 60), ($2, 0)`, [SMOOTHED, UNSMOOTHED]);
}, 60_000);

afterAll(async () => {
  await db?.$disconnect();
  await database?.drop();
});

type Read = [assetId: number, seconds: number, locationId: number];

const row = (orgId: number, [assetId, seconds, locationId]: Read): ScanRow => scanRow(orgId, assetId, seconds, locationId);

/** The organizations' windows, as a scan batch reads them with the organizations. */
async function windows(): Promise<Map<number, number>> {
  const rows = await query<{ id: number; smoothing_window_s: number }>(db, `SELECT id, smoothing_window_s FROM tracking.orgs`);
  return new Map(rows.map((r) => [r.id, r.smoothing_window_s]));
}

/** One scan batch as the scan service commits it; returns whether each attempt read its positions locked. */
async function batch(smoother: Smoother, reads: Read[], orgId = SMOOTHED): Promise<boolean[]> {
  const attempts: boolean[] = [];
  const known = await windows();
  await smoother.record((locked) =>
    inTransaction(db, async (tx) => {
      attempts.push(locked);
      const rows = reads.map((read) => row(orgId, read));
      await smoother.apply(tx, rows, { locked, windows: known });
      const recorded = await recordScans(tx, rows);
      smoother.check(recorded);
      return { recorded };
    }),
  );
  return attempts;
}

async function history(assetId: number, orgId = SMOOTHED): Promise<Array<[number, number]>> {
  const rows = await query<{ us: string; location_id: number }>(
    db,
    `SELECT (observed_key / 16)::text AS us, location_id FROM tracking.history WHERE org_id = $1 AND asset_id = $2 ORDER BY observed_key`,
    [orgId, assetId],
  );
  return rows.map((r) => [(Number(r.us) - base * 1000) / 1_000_000, r.location_id]);
}

// 0 is a row; 30 and 59.999 are inside its window; 60 is outside (a row, the new anchor); 90 inside it; 100 a move; 110 a move back.
const PLAN: Array<[number, number]> = [[0, 1], [30, 1], [59.999, 1], [60, 1], [90, 1], [100, 2], [110, 1]];
const KEPT: Array<[number, number]> = [[0, 1], [60, 1], [100, 2], [110, 1]];

describe("smoothing decisions", () => {
  it("on remembered positions, batch after batch, are the window's rules", async () => {
    const smoother = createSmoother();
    const attempts: boolean[][] = [];
    for (const [seconds, location] of PLAN) attempts.push(await batch(smoother, [[101, seconds, location]]));
    expect(await history(101)).toEqual(KEPT);
    // One attempt each, none locked: the first read the (absent) position, the rest used what the smoother remembered.
    expect(attempts).toEqual(PLAN.map(() => [false]));
    expect(smoother.remembered()).toBe(1);
  });

  it("within one batch are the same, in observed order whatever the arrival order", async () => {
    const smoother = createSmoother();
    const reads: Read[] = PLAN.map(([seconds, location]) => [102, seconds, location]);
    await batch(smoother, [...reads].reverse());
    expect(await history(102)).toEqual(KEPT);
  });

  it("are off for an organization without a window: every read is a row, nothing is remembered", async () => {
    const smoother = createSmoother();
    for (const [seconds, location] of PLAN) await batch(smoother, [[103, seconds, location]], UNSMOOTHED);
    expect(await history(103, UNSMOOTHED)).toEqual(PLAN);
    expect(smoother.remembered()).toBe(0);
  });

  it("remember each position as the scan batch statement leaves it: late reads, ties, several reads of an asset", async () => {
    const smoother = createSmoother();
    const stored = async (assetId: number) => {
      const [p] = await query<{ location_id: number; observed_us: string; history_us: string | null; scan_count: number }>(
        db,
        `SELECT location_id, (extract(epoch FROM observed_at) * 1000000)::bigint::text AS observed_us,
                (extract(epoch FROM history_at) * 1000000)::bigint::text AS history_us, scan_count
           FROM tracking.positions WHERE org_id = $1 AND asset_id = $2`,
        [SMOOTHED, assetId],
      );
      return { locationId: p!.location_id, observedUs: Number(p!.observed_us), historyUs: p!.history_us === null ? undefined : Number(p!.history_us), scanCount: p!.scan_count };
    };
    const batches: Read[][] = [
      [[107, 100, 1], [108, 100, 1], [109, 200, 1]],
      // A repeat inside the window (no row): the position moves on, the last row stays at 200.
      [[109, 210, 1]],
      // Then a late read (older than the position, newer than the last row): a row, and the newest row.
      [[109, 205, 2]],
      // Several reads of one asset, out of order, one a move and one back.
      [[107, 130, 1], [107, 110, 2], [107, 120, 1], [108, 101, 1]],
      // Late reads (older than the position): written, the position stays; one at another place.
      [[107, 50, 3], [108, 90, 1]],
      // A tie at the position's instant, at another place: the later one takes the place.
      [[107, 130, 2]],
      // A late read and a newer one of the same asset in one batch.
      [[108, 95, 2], [108, 170, 1]],
    ];
    for (const reads of batches) {
      expect(await batch(smoother, reads)).toEqual([false]);
      for (const assetId of [107, 108, 109]) expect(smoother.position(SMOOTHED, assetId)).toEqual(await stored(assetId));
    }
  });

  it("forget an organization's positions while its smoothing is off", async () => {
    const smoother = createSmoother();
    expect(await batch(smoother, [[106, 0, 1]])).toEqual([false]);
    await query(db, `UPDATE tracking.orgs SET smoothing_window_s = 0 WHERE id = $1`, [SMOOTHED]);
    try {
      expect(await batch(smoother, [[106, 10, 2]])).toEqual([false]);
      expect(smoother.remembered()).toBe(0);
    } finally {
      await query(db, `UPDATE tracking.orgs SET smoothing_window_s = 60 WHERE id = $1`, [SMOOTHED]);
    }
    // On again: decided on the stored position (at 2 since 10), not on a stale memory of 1 since 0.
    expect(await batch(smoother, [[106, 20, 2]])).toEqual([false]);
    expect(await history(106)).toEqual([[0, 1], [10, 2]]);
  });

  it("catch a position another writer changed: decided again on locked rows, then locked for a while", async () => {
    let clock = 0;
    const replica = createSmoother({ now: () => clock, distrustMs: 60_000 });
    const other = createSmoother();
    expect(await batch(replica, [[104, 0, 1]])).toEqual([false]);
    // The other replica moves the asset; this one still remembers it at 1 since 0.
    expect(await batch(other, [[104, 20, 2]])).toEqual([false]);
    // Back at 1 at 30: on the remembered position it would be inside the window (no row, the move back lost).
    expect(await batch(replica, [[104, 30, 1]])).toEqual([false, true]);
    expect(await history(104)).toEqual([[0, 1], [20, 2], [30, 1]]);
    // The other replica's memory is stale now too.
    expect(await batch(other, [[104, 40, 2]])).toEqual([false, true]);
    // For a while every batch reads its positions locked (another writer is about)...
    expect(await batch(replica, [[104, 50, 2]])).toEqual([true]);
    // ...then it trusts what it remembers again.
    clock += 60_000;
    expect(await batch(replica, [[104, 70, 2]])).toEqual([false]);
    expect(await history(104)).toEqual([[0, 1], [20, 2], [30, 1], [40, 2]]);
  });

  it("catch a position another writer created after this one found none", async () => {
    const replica = createSmoother();
    const other = createSmoother();
    // Both decide with no position; the other commits first.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const attempts: boolean[] = [];
    const known = await windows();
    const first = replica.record((locked) =>
      inTransaction(db, async (tx) => {
        attempts.push(locked);
        const rows = [row(SMOOTHED, [105, 30, 1])];
        await replica.apply(tx, rows, { locked, windows: known });
        if (!locked) await held;
        const recorded = await recordScans(tx, rows);
        replica.check(recorded);
        return { recorded };
      }),
    );
    await batch(other, [[105, 0, 1]]);
    release();
    await first;
    expect(attempts).toEqual([false, true]);
    // Decided on the other's row (at 1 since 0): 30 is inside its window.
    expect(await history(105)).toEqual([[0, 1]]);
  });
});
