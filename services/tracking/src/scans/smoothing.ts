/**
 * Smoothing (EXTENSIONS.md section 5): with an organization's
 * `smoothing_window_s` above 0, a read of an asset at the location it is
 * already at, within the window of its last history row, adds no history row
 * (the position and last seen still advance). Off (0, the default), nothing
 * here runs and every scan writes its row, as the spec has it.
 *
 * Decided per batch, in observed order per asset, against the asset's
 * position as it stood before the batch. A late read (older than the
 * position) always writes its row.
 *
 * Where that position comes from: reading the batch's positions cost as much
 * as the history rows smoothing saves (7 µs a read of 20 here;
 * `npm run bench:smoothing`), so the smoother remembers the positions its own
 * batches leave (worked out as the scan batch statement writes them) and
 * reads only the others, without a lock. Every decision names the position's
 * `scan_count` it assumed (every write to a position raises it); the scan
 * batch statement compares it with the row it locks and counts the assets
 * another writer (a second tracking replica) changed meanwhile. Then the
 * transaction is rolled back and decided again on locked rows, and for a
 * while every batch reads its positions locked.
 */
import { epochMicrosSql } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";
import type { RecordedScans, ScanRow } from "./scan-store.ts";

/** An asset's position as smoothing needs it. */
export interface HeldPosition {
  locationId: number;
  observedUs: number;
  /** The newest history row's instant; undefined before the first. */
  historyUs: number | undefined;
  scanCount: number;
}

/** Positions remembered (about 100 bytes each); past it, the smoother forgets them all and starts again. */
export const SMOOTHING_MEMORY = 100_000;
/** After a stale position, how long every batch decides on locked rows. */
export const SMOOTHING_DISTRUST_MS = 60_000;

/** The decisions assumed a position another writer changed: roll back and decide again, locked. */
export class StalePositionsError extends Error {
  override readonly name = "StalePositionsError";
}

/** Per organization, per asset (numbers, not joined strings: this runs for every read of a batch). */
type ByAsset<T> = Map<number, Map<number, T>>;

function entry<T>(map: ByAsset<T>, orgId: number): Map<number, T> {
  let assets = map.get(orgId);
  if (!assets) map.set(orgId, (assets = new Map()));
  return assets;
}

/** Organization id to its window in seconds (0: off), as read with the batch's organizations. */
export type SmoothingWindows = ReadonlyMap<number, number>;

export function createSmoother(options: { memory?: number; distrustMs?: number; now?: () => number } = {}) {
  const memory = options.memory ?? SMOOTHING_MEMORY;
  const distrustMs = options.distrustMs ?? SMOOTHING_DISTRUST_MS;
  const now = options.now ?? Date.now;
  const held: ByAsset<HeldPosition> = new Map();
  let rememberedCount = 0;
  let distrustedUntil = 0;
  /** The positions the batch being recorded leaves, once it commits. */
  let pending: Array<[orgId: number, assetId: number, position: HeldPosition]> = [];

  function forget(orgId: number): void {
    const assets = held.get(orgId);
    if (!assets) return;
    rememberedCount -= assets.size;
    held.delete(orgId);
  }

  /**
   * Marks the rows smoothing suppresses (`keep = false`) and the positions
   * assumed (`heldCount`); returns how many were suppressed. `locked`: read
   * every position decided on, locked, instead of what is remembered.
   */
  async function apply(tx: Db, rows: ScanRow[], mode: { locked: boolean; windows: SmoothingWindows }): Promise<number> {
    pending = [];
    const windowUs = new Map<number, number>();
    for (const [orgId, seconds] of mode.windows) {
      if (seconds > 0) windowUs.set(orgId, seconds * 1_000_000);
      // Off, an organization's positions move without the smoother: what it remembers of them would be stale.
      else forget(orgId);
    }
    if (!windowUs.size || !rows.length) return 0;
    // Per asset: its reads, and its position before the batch (remembered, or read below).
    const trusted = !mode.locked;
    const byAsset: ByAsset<{ rows: ScanRow[]; position: HeldPosition | undefined }> = new Map();
    const unknown: { orgIds: number[]; assetIds: number[] } = { orgIds: [], assetIds: [] };
    for (const row of rows) {
      if (!windowUs.has(row.orgId)) continue;
      const assets = entry(byAsset, row.orgId);
      const asset = assets.get(row.assetId);
      if (asset) {
        asset.rows.push(row);
        continue;
      }
      const position = trusted ? held.get(row.orgId)?.get(row.assetId) : undefined;
      assets.set(row.assetId, { rows: [row], position });
      if (!position) {
        unknown.orgIds.push(row.orgId);
        unknown.assetIds.push(row.assetId);
      }
    }
    if (unknown.orgIds.length) {
      // Locked, no other writer can change them before the batch's upsert; unlocked, the upsert checks scan_count.
      const read = await query<{ org_id: number; asset_id: number; location_id: number; observed_us: string; history_us: string | null; scan_count: number }>(
        tx,
        `SELECT p.org_id, p.asset_id, p.location_id, p.scan_count,
                ${epochMicrosSql("p.observed_at")}::text AS observed_us,
                ${epochMicrosSql("p.history_at")}::text AS history_us
           FROM tracking.positions p
           JOIN unnest($1::int[], $2::int[]) AS a(org_id, asset_id) ON p.org_id = a.org_id AND p.asset_id = a.asset_id
          ORDER BY p.org_id, p.asset_id
          ${trusted ? "" : "FOR UPDATE OF p"}`,
        [unknown.orgIds, unknown.assetIds],
      );
      for (const s of read) {
        byAsset.get(s.org_id)!.get(s.asset_id)!.position = {
          locationId: s.location_id,
          observedUs: Number(s.observed_us),
          historyUs: s.history_us === null ? undefined : Number(s.history_us),
          scanCount: s.scan_count,
        };
      }
    }
    let suppressed = 0;
    for (const [orgId, assets] of byAsset) {
      const windowLength = windowUs.get(orgId)!;
      for (const [assetId, { rows: list, position }] of assets) {
        let location = position?.locationId;
        let observed = position ? position.observedUs : -Infinity;
        let anchor = position?.historyUs;
        let written = position?.historyUs;
        const assumedCount = position?.scanCount ?? 0;
        if (list.length > 1) list.sort((a, b) => a.observedUs - b.observedUs || a.ord - b.ord);
        for (const row of list) {
          const us = row.observedUs;
          row.heldCount = assumedCount;
          if (us >= observed) {
            if (row.locationId === location && anchor !== undefined && us < anchor + windowLength) {
              row.keep = false;
              suppressed++;
            } else {
              location = row.locationId;
              anchor = us;
            }
            observed = us;
          }
          // late (older than the position): written, the position stays
          if (row.keep !== false && (written === undefined || us > written)) written = us;
        }
        // The row the scan batch statement leaves: the newest read's place (a tie goes to the later one),
        // the newest instant, the newest written row, and every read counted.
        const newest = list[list.length - 1]!;
        const moves = !position || newest.observedUs >= position.observedUs;
        pending.push([
          orgId,
          assetId,
          {
            locationId: moves ? newest.locationId : position.locationId,
            observedUs: moves ? newest.observedUs : position.observedUs,
            historyUs: written,
            scanCount: assumedCount + list.length,
          },
        ]);
      }
    }
    return suppressed;
  }

  /** Inside the transaction, after recordScans: throws (so rolls back) when a decision assumed a position that had changed. */
  function check(recorded: RecordedScans): void {
    if (recorded.stale) throw new StalePositionsError(`${recorded.stale} positions changed after smoothing knew them`);
  }

  /** The positions a committed batch left. Past `memory`, it starts afresh. */
  function remember(): void {
    for (const [orgId, assetId, position] of pending) {
      const assets = entry(held, orgId);
      if (!assets.has(assetId)) rememberedCount++;
      assets.set(assetId, position);
    }
    pending = [];
    if (rememberedCount > memory) {
      held.clear();
      rememberedCount = 0;
    }
  }

  /** Another writer changed positions: forget them all and decide on locked rows for a while. */
  function distrust(): void {
    held.clear();
    rememberedCount = 0;
    distrustedUntil = now() + distrustMs;
  }

  /**
   * Runs a scan batch's transaction (`attempt`: apply, recordScans, check, in
   * one transaction), decided on remembered positions; when the check finds
   * one another writer changed, again on locked rows. Remembers what the
   * committed batch left.
   */
  async function record<T>(attempt: (locked: boolean) => Promise<T>, onStale?: (err: StalePositionsError) => void): Promise<T> {
    let result: T;
    try {
      result = await attempt(now() < distrustedUntil);
    } catch (err) {
      pending = [];
      if (!(err instanceof StalePositionsError)) throw err;
      onStale?.(err);
      distrust();
      try {
        result = await attempt(true);
      } catch (again) {
        pending = [];
        throw again;
      }
    }
    remember();
    return result;
  }

  return {
    apply,
    check,
    record,
    remembered: () => rememberedCount,
    /** What it remembers of one asset's position (tests compare it with the stored row). */
    position: (orgId: number, assetId: number): HeldPosition | undefined => held.get(orgId)?.get(assetId),
  };
}
export type Smoother = ReturnType<typeof createSmoother>;
