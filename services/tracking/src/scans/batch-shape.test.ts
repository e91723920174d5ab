/**
 * shapeBatch: the per-asset arithmetic the scan batch statement used to do
 * with window functions (rank, count, kept, newest, ties), now in JS. The
 * database tests (tracking-ingest, tracking-history, smoothing) cover the
 * statement; these pin the rules row by row.
 */
import { describe, expect, it } from "vitest";
import { shapeBatch, type ScanRow } from "./scan-store.ts";

const BASE_US = 1_780_000_000_000_000;
let built = 0;
function scan(assetId: number, offsetUs: number, ord: number, more: Partial<ScanRow> = {}): ScanRow {
  built++;
  const observedUs = BASE_US + offsetUs;
  const ms = Math.floor(observedUs / 1000);
  const observedAt = `${new Date(ms).toISOString().slice(0, -1)}${String(observedUs % 1000).padStart(3, "0")}Z`;
  return { orgId: 1, assetId, observedAt, observedUs, locationId: 100 + built, ord, keep: true, ...more };
}

describe("shapeBatch", () => {
  it("gives each asset of single scans rank 1 of 1, in (org, asset) order, each scan a history row", () => {
    const rows = [scan(7, 10, 0), { ...scan(3, 20, 1), orgId: 2 }, scan(5, 30, 2)];
    const { assets, firsts, ties } = shapeBatch(rows);
    expect(assets.map((a) => [a.orgId, a.assetId, a.rank, a.count, a.kept])).toEqual([
      [1, 5, 1, 1, 1],
      [1, 7, 1, 1, 1],
      [2, 3, 1, 1, 1],
    ]);
    expect(assets.map((a) => a.newest)).toEqual([rows[2], rows[0], rows[1]]);
    expect(assets.map((a) => a.keptAt)).toEqual([rows[2]!.observedAt, rows[0]!.observedAt, rows[1]!.observedAt]);
    expect(firsts).toEqual([rows[2], rows[0], rows[1]]);
    expect(ties).toEqual([]);
  });

  it("takes the newest scan by observed time, a tie on it by the later-ingested scan, and ranks it in ingestion order", () => {
    // Ingested out of observed order; given out of ingestion order.
    const late = scan(1, 5, 2);
    const newestFirst = scan(1, 50, 0);
    const sameInstantLater = scan(1, 50, 3, { keep: false });
    const middle = scan(1, 20, 1);
    const { assets } = shapeBatch([sameInstantLater, late, middle, newestFirst]);
    expect(assets).toHaveLength(1);
    expect(assets[0]!.newest).toBe(sameInstantLater);
    expect(assets[0]!.rank).toBe(4);
    expect(assets[0]!.count).toBe(4);
    // The suppressed scan counts in count and rank, not in kept / keptAt.
    expect(assets[0]!.kept).toBe(3);
    expect(assets[0]!.keptAt).toBe(newestFirst.observedAt);
  });

  it("writes the first kept scan of a microsecond with tie 0 and hands the others to the ties, in ingestion order", () => {
    const a = scan(9, 100, 4);
    const b = scan(9, 100, 1);
    const c = scan(9, 100, 6);
    const suppressed = scan(9, 100, 0, { keep: false });
    const other = scan(9, 40, 5);
    const { firsts, ties } = shapeBatch([a, b, c, suppressed, other]);
    expect(firsts).toEqual([other, b]);
    expect(ties).toEqual([a, c]);
  });

  it("numbers each asset's history rows in time order (their insert passes), a tied or suppressed scan taking none", () => {
    const rows = [scan(2, 30, 0), scan(1, 10, 1), scan(2, 10, 2), scan(2, 20, 3), scan(2, 20, 4), scan(3, 5, 5), scan(1, 5, 6, { keep: false })];
    const { firsts, firstPasses, ties } = shapeBatch(rows);
    expect(firsts).toEqual([rows[1], rows[2], rows[3], rows[0], rows[5]]);
    expect(firstPasses).toEqual([0, 0, 1, 2, 0]);
    expect(ties).toEqual([rows[4]]);
  });

  it("keeps no history row and no keptAt for an asset whose scans were all suppressed", () => {
    const rows = [scan(4, 1, 0, { keep: false }), scan(4, 2, 1, { keep: false })];
    const { assets, firsts, ties } = shapeBatch(rows);
    expect(assets[0]).toMatchObject({ kept: 0, keptAt: null, count: 2, rank: 2 });
    expect(firsts).toEqual([]);
    expect(ties).toEqual([]);
  });

  it("names the largest scan_count smoothing assumed for the asset, null when it assumed none", () => {
    const { assets } = shapeBatch([
      scan(1, 1, 0, { heldCount: 4 }),
      scan(1, 2, 1, { heldCount: 9 }),
      scan(1, 3, 2),
      scan(2, 1, 3),
    ]);
    expect(assets.map((a) => a.heldCount)).toEqual([9, null]);
  });

  it("shapes a batch the same whichever order its rows come in (ingestion order takes the keyed sort, any other the comparator)", () => {
    let seed = 11;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let round = 0; round < 20; round++) {
      // Scans of up to 10 assets each among a few hundred, some observed out of order, tied or suppressed.
      const rows: ScanRow[] = [];
      for (let ord = 0; ord < 300; ord++) {
        const assets = new Set(Array.from({ length: 1 + Math.floor(random() * 10) }, () => 1 + Math.floor(random() * (20 + round * 30))));
        const offset = ord * 10 + (round % 2 ? Math.floor(random() * 60) - 30 : 0);
        for (const assetId of assets) rows.push(scan(assetId, offset, ord, { keep: random() > 0.1 }));
      }
      const shuffled = [...rows].sort(() => random() - 0.5);
      expect(shuffled).not.toEqual(rows);
      const shaped = shapeBatch(rows);
      expect(shaped).toEqual(shapeBatch(shuffled));
      // In (asset, ingestion) order: the reference the comparator gives.
      expect(shaped.assets.map((a) => a.assetId)).toEqual([...new Set(rows.map((r) => r.assetId))].sort((a, b) => a - b));
    }
  });
});
