/**
 * What reporting writes for a scan batch reads only the assets (and
 * locations) the batch placed or moved, each by its key: no scan of the
 * organization's assets, whose cost would grow with the catalog instead of
 * the batch. Checked with the transaction's own table statistics
 * (pg_stat_xact_user_tables) on 20,000 analyzed assets, where the planner
 * left alone hashed all of them, for the positions roll-up trigger (fired by
 * every batch's positions upsert; its roll-ups are checked against a recount
 * from positions and assets) and for the moves' partner events.
 */
import type { AssetPositionEvent } from "@whereabouts/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { PartnerEventBatch, recordPartnerEvents } from "../events/partner-events.ts";
import { createReportingDb, type ReportingDb, type SqlRunner } from "../reporting-db.ts";
import { createProjectionStore, LIVE_SCHEMA } from "./projection-store.ts";
import type { PositionRow } from "./projection-types.ts";

const ORG = 1;
const ASSETS = 20_000;
const LOCATIONS = 1_000;
let db: TestDatabase;
let sql: ReportingDb;
const store = createProjectionStore(LIVE_SCHEMA);

beforeAll(async () => {
  db = await createMigratedDatabase("positions_rollups");
  sql = createReportingDb(db.url, 2);
  // Every 7th asset has no catalog data yet (a stub: never counts), every
  // 11th is deleted, every 13th leaves in a day (a pending boundary a move
  // carries), every 17th becomes valid in a day.
  await sql.$executeRawUnsafe(
    `INSERT INTO reporting.assets (org_id, asset_id, catalog_version, external_key, valid_from, valid_to, deleted_at)
     SELECT $1, g, 1, CASE WHEN g % 7 = 0 THEN NULL ELSE 'A-' || g END,
            CASE WHEN g % 17 = 0 THEN now() + interval '1 day' ELSE '2020-01-01' END,
            CASE WHEN g % 13 = 0 THEN now() + interval '1 day' END,
            CASE WHEN g % 11 = 0 THEN '2021-01-01'::timestamptz END
       FROM generate_series(1, $2::int) g`,
    ORG,
    ASSETS,
  );
  await sql.$executeRawUnsafe(
    `INSERT INTO reporting.locations (org_id, location_id, version, external_key, valid_from)
     SELECT $1, g, 1, 'L-' || g, '2020-01-01' FROM generate_series(1, $2::int) g`,
    ORG,
    LOCATIONS,
  );
  await sql.$executeRawUnsafe(`ANALYZE reporting.assets`);
  await sql.$executeRawUnsafe(`ANALYZE reporting.locations`);
}, 120_000);

afterAll(async () => {
  await sql?.$disconnect();
  await db?.drop();
});

let clock = Date.parse("2026-11-01T00:00:00Z");
function positions(assetIds: number[], locationOf: (assetId: number) => number): PositionRow[] {
  return assetIds.map((assetId, i) => {
    const micros = (clock + i) * 1000;
    const observedAt = new Date(clock + i).toISOString();
    return { orgId: ORG, assetId, locationId: locationOf(assetId), observedAt, observedMicros: micros, seq: clock + i, arrivedAt: observedAt, continues: false };
  });
}

type Scans = Record<"assets" | "locations", { seqScans: number; indexScans: number }>;

/**
 * Runs `work` in a transaction; returns how often it scanned reporting's
 * assets and locations sequentially and by index. The backend's counts not
 * yet flushed may include earlier transactions': the work's own are the
 * difference across it (nothing flushes mid-transaction).
 */
async function scansOf(work: (tx: SqlRunner) => Promise<unknown>): Promise<Scans> {
  const scans = async (tx: SqlRunner) => {
    const rows = await tx.$queryRawUnsafe<Array<{ relname: "assets" | "locations"; seq: bigint; idx: bigint }>>(
      `SELECT relname, seq_scan AS seq, COALESCE(idx_scan, 0) AS idx FROM pg_stat_xact_user_tables
        WHERE relid IN ('reporting.assets'::regclass, 'reporting.locations'::regclass)`,
    );
    return Object.fromEntries(rows.map((r) => [r.relname, { seqScans: Number(r.seq), indexScans: Number(r.idx) }])) as Scans;
  };
  return sql.$transaction(async (tx: SqlRunner) => {
    const before = await scans(tx);
    await work(tx);
    const after = await scans(tx);
    const diff = (t: keyof Scans) => ({ seqScans: after[t].seqScans - before[t].seqScans, indexScans: after[t].indexScans - before[t].indexScans });
    return { assets: diff("assets"), locations: diff("locations") };
  });
}

/** Applies one batch of positions; returns how often it scanned reporting.assets sequentially and by index. */
async function applyBatch(rows: PositionRow[]): Promise<{ seqScans: number; indexScans: number }> {
  clock += 60_000;
  return (await scansOf((tx) => store.upsertPositions(tx, rows))).assets;
}

/** Each location's roll-up count against a recount of the counted assets placed there now, and every pending boundary where its asset is. */
async function rollupsDisagreeingWithRecount(): Promise<unknown[]> {
  return sql.$queryRawUnsafe(
    `WITH truth AS (
       SELECT p.org_id, p.location_id,
              count(*) FILTER (WHERE a.external_key IS NOT NULL AND a.deleted_at IS NULL AND a.valid_from <= now()
                                 AND (a.valid_to IS NULL OR a.valid_to > now()))::int AS assets_effective
         FROM reporting.positions p JOIN reporting.assets a ON a.org_id = p.org_id AND a.asset_id = p.asset_id
        GROUP BY p.org_id, p.location_id)
     SELECT r.location_id, r.assets_effective, t.assets_effective AS expected
       FROM reporting.location_rollups r FULL JOIN truth t ON t.org_id = r.org_id AND t.location_id = r.location_id
      WHERE r.assets_effective IS DISTINCT FROM COALESCE(t.assets_effective, 0)
     UNION ALL
     -- Pending boundaries follow their asset: each is scheduled where the asset now is.
     SELECT t.location_id, NULL, p.location_id FROM reporting.location_rollup_transitions t
       JOIN reporting.positions p ON p.org_id = t.org_id AND p.asset_id = t.asset_id
      WHERE t.location_id <> p.location_id`,
  );
}

const ids = (from: number, to: number, step = 1) => Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step);

describe("the positions roll-up trigger", () => {
  it("reads only the placed and moved assets, by key, and keeps every count equal to a recount", async () => {
    // First placements of every asset: one batch.
    const placed = await applyBatch(positions(ids(1, ASSETS), (a) => 1 + (a % LOCATIONS)));
    expect(placed.seqScans).toBe(0);
    expect(placed.indexScans).toBeGreaterThan(0);
    expect(await rollupsDisagreeingWithRecount()).toEqual([]);
    const pending = await sql.$queryRawUnsafe<Array<{ n: bigint }>>(`SELECT count(*) AS n FROM reporting.location_rollup_transitions`);
    expect(Number(pending[0]!.n)).toBeGreaterThan(0);

    // A steady batch: 4,500 assets read again, one in ten moved on.
    const batch = ids(1, 4_500 * 4, 4);
    const movers = new Set(batch.filter((_, i) => i % 10 === 0));
    const steadyPlace = (a: number) => 1 + ((a + (movers.has(a) ? 37 : 0)) % LOCATIONS);
    const steady = await applyBatch(positions(batch, steadyPlace));
    expect(steady.seqScans).toBe(0);
    // The movers are locked, then read (the rest are not read at all).
    expect(steady.indexScans).toBe(2 * movers.size);
    expect(await rollupsDisagreeingWithRecount()).toEqual([]);

    // Repeated reads only: no asset is read at all.
    const repeated = await applyBatch(positions(batch, steadyPlace));
    expect(repeated).toEqual({ seqScans: 0, indexScans: 0 });
    const lastSeen = await sql.$queryRawUnsafe<Array<{ behind: bigint }>>(
      `SELECT count(*) AS behind FROM reporting.location_rollups r
        WHERE r.last_seen_max IS DISTINCT FROM (SELECT max(p.last_seen_at) FROM reporting.positions p WHERE p.org_id = r.org_id AND p.location_id = r.location_id)`,
    );
    expect(Number(lastSeen[0]!.behind)).toBe(0);

    // Churn: every asset of the batch moves.
    const churn = await applyBatch(positions(batch, (a) => 1 + ((a + 51) % LOCATIONS)));
    expect(churn.seqScans).toBe(0);
    expect(await rollupsDisagreeingWithRecount()).toEqual([]);
  });
});

describe("the moves' partner events", () => {
  it("read each moved asset's and location's key by its primary key", async () => {
    const moved = ids(3, 4_500 * 4, 40);
    const batch = PartnerEventBatch.of({
      catalogEvents: [],
      moves: moved.map((assetId, i): AssetPositionEvent & { verb: "moved" } => ({
        version: 1,
        event_id: `move-${assetId}`,
        org_id: ORG,
        asset_id: assetId,
        location_id: 1 + (assetId % LOCATIONS),
        // The first has no previous location; one comes from a location reporting never heard of.
        previous_location_id: i === 0 ? null : i === 1 ? 999_999 : 1 + ((assetId + 1) % LOCATIONS),
        observed_at: "2026-11-20T10:00:00.000000Z",
        seq: 1,
        verb: "moved",
      })),
    });
    expect(batch.moves.length).toBe(moved.length);
    const scans = await scansOf((tx) => recordPartnerEvents(tx, batch));
    expect(scans.assets.seqScans).toBe(0);
    expect(scans.locations.seqScans).toBe(0);

    const data = await sql.$queryRawUnsafe<Array<{ data: Record<string, unknown> }>>(
      `SELECT data FROM reporting.partner_events WHERE org_id = $1 AND type = 'asset.moved' ORDER BY seq`,
      ORG,
    );
    expect(data.map((r) => r.data)).toEqual(
      moved.map((assetId, i) => ({
        asset_id: assetId,
        asset_external_key: assetId % 7 === 0 ? null : `A-${assetId}`,
        from_location_id: i === 0 ? null : i === 1 ? 999_999 : 1 + ((assetId + 1) % LOCATIONS),
        from_location_external_key: i <= 1 ? null : `L-${1 + ((assetId + 1) % LOCATIONS)}`,
        to_location_id: 1 + (assetId % LOCATIONS),
        to_location_external_key: `L-${1 + (assetId % LOCATIONS)}`,
        observed_at: "2026-11-20T10:00:00.000000Z",
      })),
    );
  });
});
