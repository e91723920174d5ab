/**
 * The hot SQL of ingestion, set-based: idempotency keys, then positions and
 * history in one statement per batch.
 */
import { epochMicrosSql, microsTimestampSql, unnestColumns } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";

/**
 * Records the idempotency keys; returns those that were new (as
 * `<org_id>|<key>`). A key already present means the scan was processed.
 */
export async function claimKeys(tx: Db, keys: Array<{ orgId: number; key: string }>): Promise<Set<string>> {
  if (!keys.length) return new Set();
  const rows = await query<{ org_id: number; key: string }>(
    tx,
    `INSERT INTO tracking.scan_keys (org_id, key)
     SELECT * FROM unnest($1::int[], $2::text[]) ORDER BY 1, 2
     ON CONFLICT DO NOTHING
     RETURNING org_id, key`,
    [keys.map((k) => k.orgId), keys.map((k) => k.key)],
  );
  return new Set(rows.map((r) => `${r.org_id}|${r.key}`));
}

export interface ScanRow {
  orgId: number;
  assetId: number;
  /** UTC with microseconds. */
  observedAt: string;
  /** The same instant, microseconds since the epoch. */
  observedUs: number;
  locationId: number;
  /** Ingestion order within the batch. */
  ord: number;
  /** false: smoothing suppressed its history row (smoothing.ts); the position still advances. */
  keep?: boolean;
  /** Smoothing decided on the asset's position with this scan_count (0: no position): checked when the row is locked. */
  heldCount?: number;
}

export interface RecordedScans {
  /** The positions this batch changed. */
  changes: PositionState[];
  /** Assets whose position another writer changed after smoothing read it: the batch must be rolled back. */
  stale: number;
}

export interface PositionState {
  orgId: number;
  assetId: number;
  locationId: number;
  /** UTC with microseconds. */
  observedAt: string;
  seq: number;
  previousLocationId: number | null;
}

/** Scans of one asset at one microsecond beyond this many cannot be ordered (observed_key has 4 tie bits). */
export const MAX_TIES = 16;

export class TieOverflowError extends Error {
  override readonly name = "TieOverflowError";
}

/** One asset's part of a batch, as the scan batch statement writes it. */
export interface AssetInBatch {
  orgId: number;
  assetId: number;
  /** Its newest scan ((observed_at, ord): a tie goes to the later-ingested scan). */
  newest: ScanRow;
  /** 1-based ingestion position of `newest` among the asset's scans in the batch. */
  rank: number;
  /** Scans of the asset in the batch. */
  count: number;
  /** Scans that keep their history row, and the newest instant among them (null: none). */
  kept: number;
  keptAt: string | null;
  /** The scan_count smoothing assumed (the largest named; null: it decided nothing). */
  heldCount: number | null;
}

export interface BatchShape {
  /** Per asset, in (org_id, asset_id) order: the order rows are locked in. */
  assets: AssetInBatch[];
  /** The first kept scan of each asset at each microsecond, in (org_id, asset_id, µs) order: history rows with tie 0. */
  firsts: ScanRow[];
  /** Per row of `firsts`: how many of its asset's `firsts` come before it (the history insert's order, see recordScans). */
  firstPasses: number[];
  /** Kept scans tied with an earlier one of the batch on (asset, microsecond): they take the next free ties. */
  ties: ScanRow[];
}

/**
 * The per-asset arithmetic of a batch, worked out here rather than in SQL:
 * as window functions and sorts over every read it was a third of the
 * statement's time (29 of 82 ms for 5,000 reads).
 */
export function shapeBatch(rows: readonly ScanRow[]): BatchShape {
  // One sort puts each asset's scans together, in ingestion order.
  const sorted = inAssetOrder(rows);
  const assets: AssetInBatch[] = [];
  const firsts: ScanRow[] = [];
  const firstPasses: number[] = [];
  const ties: ScanRow[] = [];
  for (let start = 0; start < sorted.length; ) {
    const first = sorted[start]!;
    let end = start + 1;
    while (end < sorted.length && sorted[end]!.assetId === first.assetId && sorted[end]!.orgId === first.orgId) end++;
    let newest = first;
    let rank = 1;
    let kept = 0;
    let keptAt: ScanRow | null = null;
    let heldCount: number | null = null;
    for (let i = start; i < end; i++) {
      const row = sorted[i]!;
      if (row.observedUs >= newest.observedUs) {
        newest = row;
        rank = i - start + 1;
      }
      if (row.heldCount != null && (heldCount === null || row.heldCount > heldCount)) heldCount = row.heldCount;
      if (row.keep === false) continue;
      kept++;
      if (!keptAt || row.observedUs > keptAt.observedUs) keptAt = row;
    }
    if (end - start === 1) {
      if (kept) {
        firsts.push(first);
        firstPasses.push(0);
      }
    } else {
      // Several scans of the asset: the first kept one at each microsecond (by ingestion) writes tie 0.
      const keptHere = sorted.slice(start, end).filter((r) => r.keep !== false);
      keptHere.sort((a, b) => a.observedUs - b.observedUs || a.ord - b.ord);
      let pass = 0;
      for (let i = 0; i < keptHere.length; i++) {
        const row = keptHere[i]!;
        if (i > 0 && keptHere[i - 1]!.observedUs === row.observedUs) ties.push(row);
        else {
          firsts.push(row);
          firstPasses.push(pass++);
        }
      }
    }
    assets.push({ orgId: first.orgId, assetId: first.assetId, newest, rank, count: end - start, kept, keptAt: keptAt?.observedAt ?? null, heldCount });
    start = end;
  }
  return { assets, firsts, firstPasses, ties };
}

/** Rows a batch may hold for the sort by numeric keys below (their index takes the key's low 20 bits). */
const KEYED_SORT_ROWS = 2 ** 20;

/**
 * Rows in (org_id, asset_id, ord) order. A batch comes in ingestion order
 * and, almost always, of one organization: then each row's key is its asset
 * and its place (assetId * 2^20 + index, exact in a double) and a typed array
 * sorts them without a comparator (72,000 rows: 28.5 -> 9.2 ms). Anything
 * else takes the comparator.
 */
function inAssetOrder(rows: readonly ScanRow[]): ScanRow[] {
  const n = rows.length;
  const orgId = rows[0]?.orgId;
  let keyed = n < KEYED_SORT_ROWS;
  for (let i = 0; keyed && i < n; i++) keyed = rows[i]!.orgId === orgId && (i === 0 || rows[i]!.ord >= rows[i - 1]!.ord);
  if (!keyed) return [...rows].sort((a, b) => a.orgId - b.orgId || a.assetId - b.assetId || a.ord - b.ord);
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = rows[i]!.assetId * KEYED_SORT_ROWS + i;
  keys.sort();
  const sorted: ScanRow[] = new Array<ScanRow>(n);
  for (let i = 0; i < n; i++) sorted[i] = rows[keys[i]! % KEYED_SORT_ROWS]!;
  return sorted;
}

/**
 * One history row per scan row, and each asset's position moved to its newest
 * scan when that is newer than the one it holds ((observed_at, seq); a tie on
 * observed_at goes to the later-ingested scan). seq is the asset's own
 * ingestion sequence, handed out by its position row (locked by the upsert, so
 * concurrent batches touching an asset take turns). Returns the positions
 * this batch changed.
 *
 * History rows are keyed (org_id, asset_id, observed_key = µs * 16 + tie). The
 * first scan of an asset at a microsecond in the batch is written with tie 0;
 * the rare others (a tie inside the batch, or with a stored row) take the next
 * free ties after what is stored, in ingestion order. A row after the
 * asset's stored history (positions.history_at as the row lock found it) is
 * inserted plainly; only the others risk a collision and pay for ON CONFLICT.
 *
 * For the assets smoothing decided on (`heldCount`), it counts those whose
 * position had changed since smoothing knew it (its scan_count assumption
 * against the locked row).
 */
export async function recordScans(tx: Db, rows: ScanRow[]): Promise<RecordedScans> {
  if (!rows.length) return { changes: [], stale: 0 };
  const { assets, firsts, firstPasses, ties } = shapeBatch(rows);
  const result = await query<{
    kind: "position" | "unchanged" | "tie";
    org_id: number;
    asset_id: number;
    location_id: number;
    observed_at: string | null;
    seq: number | null;
    prev_location_id: number | null;
    micros: string | null;
    ord: number | null;
    /** Smoothing's assumption about this asset's position was wrong (see above). */
    stale: boolean | null;
  }>(
    tx,
    // Named up front: pg_stat_activity shows only the first 1 kB of a statement.
    `/* scan batch: tracking.positions, tracking.history */
     WITH newest AS (
       SELECT * FROM unnest($1::int[], $2::int[], $3::timestamptz[], $4::int[], $5::int[], $6::int[], $7::int[], $8::timestamptz[], $9::int[])
                AS t(org_id, asset_id, observed_at, location_id, rn, n, kept, kept_at, held_count)
     ), up AS (
       INSERT INTO tracking.positions AS p (org_id, asset_id, location_id, observed_at, seq, scan_count, prev_location_id,
                                            history_at, history_count)
       SELECT org_id, asset_id, location_id, observed_at, rn, n, NULL, kept_at, kept FROM newest ORDER BY org_id, asset_id
       ON CONFLICT (org_id, asset_id) DO UPDATE SET
         prev_location_id = CASE WHEN excluded.observed_at >= p.observed_at THEN p.location_id ELSE p.prev_location_id END,
         location_id = CASE WHEN excluded.observed_at >= p.observed_at THEN excluded.location_id ELSE p.location_id END,
         seq = CASE WHEN excluded.observed_at >= p.observed_at THEN p.scan_count + excluded.seq ELSE p.seq END,
         observed_at = GREATEST(p.observed_at, excluded.observed_at),
         scan_count = p.scan_count + excluded.scan_count,
         history_prev_at = p.history_at,
         history_at = GREATEST(p.history_at, excluded.history_at),
         history_count = p.history_count + excluded.history_count
       RETURNING p.org_id, p.asset_id, p.location_id, p.observed_at, p.seq, p.scan_count, p.prev_location_id,
                 ${epochMicrosSql("p.history_prev_at")} AS stored_until
     ), placed AS (
       -- Every stored history row of an asset is at or before its history_at, read here from the row this statement
       -- locked (a concurrent batch's rows are committed and counted in it, or wait for this one): a row after it
       -- cannot collide. Inserted positions (no stored_until) and rows at or before it go through ON CONFLICT.
       SELECT f.org_id, f.asset_id, f.micros, f.location_id, f.ord, f.pass, (f.micros > u.stored_until) IS TRUE AS fresh
         FROM unnest($10::int[], $11::int[], $12::bigint[], $13::int[], $14::int[], $15::int[]) AS f(org_id, asset_id, micros, location_id, ord, pass)
         JOIN up u ON u.org_id = f.org_id AND u.asset_id = f.asset_id
     ), fresh AS (
       -- In passes: each asset's first row of the batch (in key order), then each one's second, and so on. Several
       -- rows of one asset inserted one after another are neighbours in both the heap and the key, which Postgres
       -- takes for an ascending insert and splits a full leaf right after the new row; the page to the right keeps
       -- the heads of other assets' ranges, which never grow, half empty. With batches that read assets several
       -- times (a backlog of 50,000 reads over 20,000 assets) the key grew from 42 to 50 bytes a row.
       INSERT INTO tracking.history (org_id, asset_id, observed_key, location_id)
       SELECT org_id, asset_id, micros * ${MAX_TIES}, location_id FROM placed WHERE fresh ORDER BY pass, org_id, asset_id, micros
     ), late AS (
       INSERT INTO tracking.history (org_id, asset_id, observed_key, location_id)
       SELECT org_id, asset_id, micros * ${MAX_TIES}, location_id FROM placed WHERE NOT fresh ORDER BY org_id, asset_id, micros
       ON CONFLICT DO NOTHING
       RETURNING org_id, asset_id, observed_key
     )
     SELECT CASE WHEN u.seq > u.scan_count - n.n THEN 'position' ELSE 'unchanged' END AS kind, u.org_id, u.asset_id, u.location_id,
            ${microsTimestampSql("u.observed_at")} AS observed_at, u.seq, u.prev_location_id,
            NULL::text AS micros, NULL::int AS ord, u.scan_count - n.n <> n.held_count AS stale
       FROM up u JOIN newest n ON n.org_id = u.org_id AND n.asset_id = u.asset_id
      WHERE u.seq > u.scan_count - n.n OR u.scan_count - n.n <> n.held_count
     UNION ALL
     SELECT 'tie', p.org_id, p.asset_id, p.location_id, NULL, NULL, NULL, p.micros::text, p.ord, NULL
       FROM placed p
       LEFT JOIN late h ON h.org_id = p.org_id AND h.asset_id = p.asset_id AND h.observed_key = p.micros * ${MAX_TIES}
      WHERE NOT p.fresh AND h.org_id IS NULL`,
    [
      assets.map((a) => a.orgId),
      assets.map((a) => a.assetId),
      assets.map((a) => a.newest.observedAt),
      assets.map((a) => a.newest.locationId),
      assets.map((a) => a.rank),
      assets.map((a) => a.count),
      assets.map((a) => a.kept),
      assets.map((a) => a.keptAt),
      assets.map((a) => a.heldCount),
      // Each column by its own property (unnestColumns' row[field] is a generic lookup: three times slower here).
      firsts.map((f) => f.orgId),
      firsts.map((f) => f.assetId),
      firsts.map((f) => f.observedUs),
      firsts.map((f) => f.locationId),
      firsts.map((f) => f.ord),
      firstPasses,
    ],
  );
  const tied = result.filter((r) => r.kind === "tie").map((t) => ({ orgId: t.org_id, assetId: t.asset_id, micros: t.micros!, locationId: t.location_id, ord: t.ord! }));
  for (const t of ties) tied.push({ orgId: t.orgId, assetId: t.assetId, micros: String(t.observedUs), locationId: t.locationId, ord: t.ord });
  if (tied.length) await recordTies(tx, tied);
  const changes: PositionState[] = [];
  let stale = 0;
  for (const r of result) {
    if (r.stale) stale++;
    if (r.kind === "position") {
      changes.push({
        orgId: r.org_id,
        assetId: r.asset_id,
        locationId: r.location_id,
        observedAt: r.observed_at!,
        seq: r.seq!,
        previousLocationId: r.prev_location_id,
      });
    }
  }
  return { changes, stale };
}

/** History rows for scans tied on (asset, microsecond) with another: the next free ties, in ingestion order. */
async function recordTies(
  tx: Db,
  ties: Array<{ orgId: number; assetId: number; micros: string; locationId: number; ord: number }>,
): Promise<void> {
  ties.sort((a, b) => a.ord - b.ord);
  const inserted = await query<{ n: bigint }>(
    tx,
    `WITH tied AS (
       SELECT t.*, row_number() OVER (PARTITION BY org_id, asset_id, micros ORDER BY ord) - 1 AS k
         FROM unnest($1::int[], $2::int[], $3::bigint[], $4::int[], $5::int[]) AS t(org_id, asset_id, micros, location_id, ord)
     ), placed AS (
       SELECT t.org_id, t.asset_id, f.next + t.k AS observed_key, t.location_id, t.micros
         FROM tied t
         CROSS JOIN LATERAL (
           SELECT COALESCE(max(h.observed_key) + 1, t.micros * ${MAX_TIES}) AS next FROM tracking.history h
            WHERE h.org_id = t.org_id AND h.asset_id = t.asset_id
              AND h.observed_key >= t.micros * ${MAX_TIES} AND h.observed_key < (t.micros + 1) * ${MAX_TIES}
         ) f
     ), written AS (
       INSERT INTO tracking.history (org_id, asset_id, observed_key, location_id)
       SELECT org_id, asset_id, observed_key, location_id FROM placed
        WHERE observed_key < (micros + 1) * ${MAX_TIES}
        ORDER BY org_id, asset_id, observed_key
       RETURNING 1
     )
     SELECT count(*) AS n FROM written`,
    unnestColumns(ties, "orgId", "assetId", "micros", "locationId", "ord"),
  );
  if (Number(inserted[0]?.n ?? 0) !== ties.length) {
    throw new TieOverflowError(`more than ${MAX_TIES} scans of one asset at the same microsecond`);
  }
}

/** Current positions of the given assets (to announce again after a redelivery). */
export async function currentPositions(db: Db, assets: Array<{ orgId: number; assetId: number }>): Promise<PositionState[]> {
  if (!assets.length) return [];
  const rows = await query<{
    org_id: number;
    asset_id: number;
    location_id: number;
    observed_at: string;
    seq: number;
    prev_location_id: number | null;
  }>(
    db,
    `SELECT p.org_id, p.asset_id, p.location_id, ${microsTimestampSql("p.observed_at")} AS observed_at,
            p.seq, p.prev_location_id
       FROM unnest($1::int[], $2::int[]) AS a(org_id, asset_id)
       JOIN tracking.positions p ON p.org_id = a.org_id AND p.asset_id = a.asset_id`,
    unnestColumns(assets, "orgId", "assetId"),
  );
  return rows.map((r) => ({
    orgId: r.org_id,
    assetId: r.asset_id,
    locationId: r.location_id,
    observedAt: r.observed_at,
    seq: r.seq,
    previousLocationId: r.prev_location_id,
  }));
}
