/**
 * The scan batch statement's history rows against a real database: rows after
 * the asset's stored history go in without ON CONFLICT, the others (and every
 * row of an asset's first batch) through it, so a row at the instant of a
 * stored one still becomes the next tie. Also when another transaction writes
 * the same asset at the same instant meanwhile: the row lock orders them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { createTrackingClient, inTransaction, query, type TrackingClient } from "../db/tracking-db.ts";
import { MAX_TIES, recordScans, type ScanRow } from "./scan-store.ts";
import { scanRows } from "../testing/scan-rows.ts";

let database: TestDatabase;
let db: TrackingClient;
const ORG = 1;
const rows = scanRows();
const base = rows.base;

beforeAll(async () => {
  database = await createMigratedDatabase("tracking_scan_store");
  db = createTrackingClient(database.url, 3);
}, 60_000);

afterAll(async () => {
  await db?.$disconnect();
  await database?.drop();
});

const scan = (assetId: number, seconds: number, locationId = 10): ScanRow => rows.row(ORG, assetId, seconds, locationId);

/** The asset's history as (seconds, tie, location), oldest first. */
async function historyOf(assetId: number): Promise<Array<[number, number, number]>> {
  const rows = await query<{ key: string; location_id: number }>(
    db,
    `SELECT observed_key::text AS key, location_id FROM tracking.history WHERE org_id = $1 AND asset_id = $2 ORDER BY observed_key`,
    [ORG, assetId],
  );
  return rows.map((r) => {
    const key = BigInt(r.key);
    const micros = key / BigInt(MAX_TIES);
    return [Number(micros - BigInt(base) * 1000n) / 1e6, Number(key % BigInt(MAX_TIES)), r.location_id];
  });
}

/** Waits until `n` backends of this database wait on a lock. */
async function lockWaiters(n: number): Promise<void> {
  await eventually(async () => {
    const [row] = await query<{ n: number }>(
      db,
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    return row!.n === n ? true : undefined;
  });
}

describe("history rows of a scan batch", () => {
  it("writes rows after the stored history plainly and the others through ON CONFLICT, ties included", async () => {
    await inTransaction(db, (tx) => recordScans(tx, [scan(1, 10), scan(1, 20)]));
    const [held] = await query<{ prev: string | null; at: string }>(
      db,
      `SELECT history_prev_at::text AS prev, history_at::text AS at FROM tracking.positions WHERE org_id = $1 AND asset_id = 1`,
      [ORG],
    );
    // Inserted by the batch: no earlier history instant.
    expect(held?.prev).toBeNull();

    // After the stored rows (30), at a stored instant (20: the next tie), before them without a collision (5),
    // and twice at a new instant inside the batch (40, 40: ties 0 and 1).
    await inTransaction(db, (tx) => recordScans(tx, [scan(1, 30, 11), scan(1, 20, 12), scan(1, 5, 13), scan(1, 40, 14), scan(1, 40, 15)]));
    expect(await historyOf(1)).toEqual([
      [5, 0, 13],
      [10, 0, 10],
      [20, 0, 10],
      [20, 1, 12],
      [30, 0, 11],
      [40, 0, 14],
      [40, 1, 15],
    ]);
    const [after] = await query<{ prev: string; count: number }>(
      db,
      `SELECT to_char(history_prev_at AT TIME ZONE 'UTC', 'HH24:MI:SS') AS prev, history_count AS count
         FROM tracking.positions WHERE org_id = $1 AND asset_id = 1`,
      [ORG],
    );
    expect(after).toEqual({ prev: "10:00:20", count: 7 });
  });

  it("inserts a batch's new rows in passes (each asset's first, then each one's second, ...), every row kept", async () => {
    await inTransaction(db, (tx) => recordScans(tx, [scan(3, 1), scan(4, 1)]));
    // Given out of order: three new rows of each asset.
    await inTransaction(db, (tx) => recordScans(tx, [scan(4, 4, 41), scan(3, 3, 33), scan(3, 2, 32), scan(4, 3, 43), scan(4, 2, 42), scan(3, 4, 34)]));
    expect(await historyOf(3)).toEqual([[1, 0, 10], [2, 0, 32], [3, 0, 33], [4, 0, 34]]);
    expect(await historyOf(4)).toEqual([[1, 0, 10], [2, 0, 42], [3, 0, 43], [4, 0, 41]]);
    // Heap order is insert order (the table only grows here): neighbours in the key are never inserted back to back,
    // which Postgres would take for an ascending insert and split index pages after (see recordScans).
    const inserted = await query<{ asset_id: number; location_id: number }>(
      db,
      `SELECT asset_id, location_id FROM tracking.history WHERE org_id = $1 AND asset_id IN (3, 4) AND location_id <> 10 ORDER BY ctid`,
      [ORG],
    );
    expect(inserted.map((r) => [r.asset_id, r.location_id])).toEqual([[3, 32], [4, 42], [3, 33], [4, 43], [3, 34], [4, 41]]);
  });

  it("orders two transactions writing one asset at one instant by its position row: the second's row becomes a tie", async () => {
    await inTransaction(db, (tx) => recordScans(tx, [scan(2, 1)]));
    let releaseFirst!: () => void;
    const firstMayCommit = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstWrote!: () => void;
    const wrote = new Promise<void>((resolve) => (firstWrote = resolve));
    const first = inTransaction(db, async (tx) => {
      await recordScans(tx, [scan(2, 50, 21)]);
      firstWrote();
      await firstMayCommit;
    });
    await wrote;
    // Blocks on asset 2's position row until the first commits; then reads the history instant it left.
    const second = inTransaction(db, (tx) => recordScans(tx, [scan(2, 50, 22)]));
    await lockWaiters(1);
    releaseFirst();
    await Promise.all([first, second]);
    expect(await historyOf(2)).toEqual([
      [1, 0, 10],
      [50, 0, 21],
      [50, 1, 22],
    ]);
  });
});
