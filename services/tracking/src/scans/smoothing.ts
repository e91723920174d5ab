/**
 * Smoothing (EXTENSIONS.md section 5): with an organization's
 * `smoothing_window_s` above 0, a read of an asset at the location it is
 * already at, within the window of its last history row, adds no history row
 * (the position and last seen still advance). Off (0, the default), nothing
 * here runs and every scan writes its row, as the spec has it.
 *
 * Decided per batch, in observed order per asset, against the asset's
 * position row locked for the batch (so concurrent batches take turns, as
 * they do for the position upsert). A late read (older than the position)
 * always writes its row.
 */
import { epochMicrosSql, parseRfc3339 } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";
import type { ScanRow } from "./scan-store.ts";

const microsOf = (instant: string): number => {
  const parsed = parseRfc3339(instant)!;
  return parsed.ms * 1000 + parsed.micros;
};

/** Marks the rows smoothing suppresses (`keep = false`); returns how many. */
export async function applySmoothing(tx: Db, rows: ScanRow[]): Promise<number> {
  if (!rows.length) return 0;
  const orgIds = [...new Set(rows.map((r) => r.orgId))];
  const windows = await query<{ id: number; smoothing_window_s: number }>(
    tx,
    `SELECT id, smoothing_window_s FROM tracking.orgs WHERE id = ANY ($1::int[]) AND smoothing_window_s > 0`,
    [orgIds],
  );
  if (!windows.length) return 0;
  const windowUs = new Map(windows.map((w) => [w.id, w.smoothing_window_s * 1_000_000]));
  const byAsset = new Map<string, ScanRow[]>();
  for (const row of rows) {
    if (!windowUs.has(row.orgId)) continue;
    const key = `${row.orgId}:${row.assetId}`;
    const list = byAsset.get(key);
    if (list) list.push(row);
    else byAsset.set(key, [row]);
  }
  const assets = [...byAsset.values()].map((list) => list[0]!);
  const states = await query<{ org_id: number; asset_id: number; location_id: number; observed_us: string; history_us: string | null }>(
    tx,
    `SELECT p.org_id, p.asset_id, p.location_id,
            ${epochMicrosSql("p.observed_at")}::text AS observed_us,
            ${epochMicrosSql("p.history_at")}::text AS history_us
       FROM tracking.positions p
       JOIN unnest($1::int[], $2::int[]) AS a(org_id, asset_id) ON p.org_id = a.org_id AND p.asset_id = a.asset_id
      ORDER BY p.org_id, p.asset_id
        FOR UPDATE OF p`,
    [assets.map((a) => a.orgId), assets.map((a) => a.assetId)],
  );
  const stateOf = new Map(states.map((s) => [`${s.org_id}:${s.asset_id}`, s]));
  let suppressed = 0;
  for (const [key, list] of byAsset) {
    const windowLength = windowUs.get(list[0]!.orgId)!;
    const held = stateOf.get(key);
    let location = held?.location_id;
    let observed = held ? Number(held.observed_us) : -Infinity;
    let anchor = held?.history_us ? Number(held.history_us) : undefined;
    const ordered = list.map((row) => ({ row, us: microsOf(row.observedAt) })).sort((a, b) => a.us - b.us || a.row.ord - b.row.ord);
    for (const { row, us } of ordered) {
      if (us < observed) continue; // late: written, the position stays
      if (row.locationId === location && anchor !== undefined && us < anchor + windowLength) {
        row.keep = false;
        suppressed++;
      } else {
        location = row.locationId;
        anchor = us;
      }
      observed = us;
    }
  }
  return suppressed;
}
