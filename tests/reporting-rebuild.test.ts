/**
 * Rebuild: the read model from the streams into fresh tables, swapped in
 * while the endpoint keeps answering, without losing events that arrive
 * during the rebuild; and the CLI that runs it.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { createLogger } from "@whereabouts/shared";
import { createEventPublisher, type EventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { rebuildReadModel } from "../services/reporting/src/rebuild/rebuild-service.ts";
import { createReportingDb, type ReportingDb } from "../services/reporting/src/reporting-db.ts";
import { startStack, type Stack } from "./harness.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let stack: Stack;
let auth: Record<string, string>;
let pub: EventPublisher;
let sql: pg.Client;
let db: ReportingDb;
const ASSETS = 300;

async function report(query: string) {
  return stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?${query}`, headers: auth });
}
async function everything() {
  const pages = [];
  for (let offset = 0; offset < ASSETS + 50; offset += 200) {
    const res = await report(`include_deleted=true&limit=200&offset=${offset}&sort=asset_external_key`);
    expect(res.statusCode).toBe(200);
    pages.push(...res.json().data);
  }
  return pages;
}
const tableOids = async () =>
  (
    await sql.query<{ oid: string }>(
      "SELECT c.oid::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reporting' AND c.relname IN ('assets','locations','tags') ORDER BY c.relname",
    )
  ).rows.map((r) => r.oid);
const indexNames = async () =>
  (await sql.query<{ indexname: string; tablename: string }>("SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'reporting' ORDER BY 1, 2")).rows;
const triggerNames = async () =>
  (
    await sql.query<{ name: string }>(
      "SELECT c.relname || '.' || t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reporting' AND NOT t.tgisinternal ORDER BY 1",
    )
  ).rows.map((r) => r.name);
const countRows = async () =>
  (await sql.query<{ org_id: number; open_live: number; open_all: number }>("SELECT * FROM reporting.counts ORDER BY org_id")).rows;

beforeAll(async () => {
  stack = await startStack({ label: "reporting_rebuild", services: ["reporting"] });
  const t = await stack.tenant("Rebuild");
  auth = t.auth;
  pub = createEventPublisher(stack.nc, t.orgId);
  sql = new pg.Client({ connectionString: stack.db.url });
  await sql.connect();
  db = createReportingDb(stack.db.url, 4);

  await pub.location({ id: 1, key: "HALL-1" });
  await pub.location({ id: 2, key: "HALL-2" });
  await pub.location({ id: 2, key: "HALL-2-RENAMED", version: 2, verb: "renamed" });
  const pending = [];
  for (let i = 1; i <= ASSETS; i++) {
    pending.push(
      (async () => {
        await pub.scannedAsset({
          id: i,
          key: `RB-${String(i).padStart(4, "0")}`,
          locationId: (i % 2) + 1,
          observedAt: new Date(Date.parse("2026-11-20T10:00:00.000Z") + i * 1000).toISOString(),
          seq: i,
        });
        if (i % 10 === 0) await pub.tag({ id: 5000 + i, assetId: i, value: `rb-tag-${i}` });
        if (i % 25 === 0) await pub.asset({ id: i, key: `RB-${String(i).padStart(4, "0")}`, version: 2, deletedAt: "2026-11-20T11:00:00.000Z" });
      })(),
    );
  }
  await Promise.all(pending);
});
afterAll(async () => {
  await db?.$disconnect();
  await sql?.end();
  await stack?.close();
});

describe("reporting rebuild", () => {
  it("rebuilds from the streams into fresh tables and swaps them in while the endpoint answers", async () => {
    const expected = await everything();
    expect(expected).toHaveLength(ASSETS);
    const oidsBefore = await tableOids();
    const indexesBefore = await indexNames();
    const triggersBefore = await triggerNames();
    // The report's counts (3) and the location roll-up's (3 on assets, 2 on positions).
    expect(triggersBefore).toHaveLength(8);

    // Damage the live read model: only a rebuild from the streams can repair it.
    await sql.query("UPDATE reporting.assets SET external_key = 'DAMAGED' WHERE asset_id <= 50");
    await sql.query("DELETE FROM reporting.locations");
    await sql.query("DELETE FROM reporting.tags");
    await sql.query("UPDATE reporting.counts SET open_live = 0, open_all = 0");

    // Readers during the whole rebuild: every answer a 200 with the full count.
    let reading = true;
    const statuses: number[] = [];
    const counts = new Set<number>();
    const readers = [0, 1].map(async () => {
      while (reading) {
        const res = await report("include_deleted=true&limit=10");
        statuses.push(res.statusCode);
        if (res.statusCode === 200) counts.add(res.json().total_count);
      }
    });

    // Events during the rebuild, after its replay: the live consumer applies
    // them to the old tables; the swap must carry them over.
    const figures = await rebuildReadModel({
      nc: stack.nc,
      db,
      databaseUrl: stack.db.url,
      logger: createLogger("rebuild-test", "silent"),
      batchSize: 64,
      beforeSwap: async () => {
        await pub.asset({ id: 7, key: "RB-RENAMED-7", version: 3, verb: "renamed" });
        await pub.position({ assetId: 8, locationId: 1, observedAt: "2026-11-21T00:00:00.000Z", seq: 10_000 });
        await pub.scannedAsset({ id: ASSETS + 1, key: "RB-NEW", locationId: 1, observedAt: "2026-11-21T00:00:01.000Z", seq: 10_001 });
        // And one while the swap waits for the lock: published right away, applied after.
        void pub.location({ id: 1, key: "HALL-1-LATE", version: 2, verb: "renamed" });
      },
    });
    reading = false;
    await Promise.all(readers);

    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(figures).toMatchObject({ status: "ok", locations: 2, tags: ASSETS / 10 });
    expect(figures.catalog_messages).toBeGreaterThanOrEqual(3 + ASSETS + ASSETS / 10 + ASSETS / 25);
    expect(figures.report_rows).toBe(ASSETS + 1);

    // Fresh tables, same structure (index names included), scratch schemas gone.
    expect(await tableOids()).not.toEqual(oidsBefore);
    expect(await indexNames()).toEqual(indexesBefore);
    expect(await triggerNames()).toEqual(triggersBefore);
    // Storage parameters too (LIKE does not copy them).
    const options = await sql.query("SELECT reloptions FROM pg_class WHERE oid = 'reporting.positions'::regclass");
    expect(options.rows[0].reloptions).toEqual(["fillfactor=70"]);
    // The counts were rebuilt too: total_count agrees with the rows.
    expect(await countRows()).toEqual([
      expect.objectContaining({ open_all: ASSETS + 1, open_live: ASSETS + 1 - ASSETS / 25 }),
    ]);
    expect((await report("limit=1")).json().total_count).toBe(ASSETS + 1 - ASSETS / 25);
    expect((await report("limit=1&include_deleted=true")).json().total_count).toBe(ASSETS + 1);
    const scratch = await sql.query("SELECT nspname FROM pg_namespace WHERE nspname IN ('reporting_build', 'reporting_retired')");
    expect(scratch.rowCount).toBe(0);

    // Repaired from the streams, plus the events that arrived during the rebuild.
    const after = await everything();
    const byId = new Map(after.map((r) => [r.asset_id, r]));
    expect(after).toHaveLength(ASSETS + 1);
    expect(byId.get(7)?.asset_external_key).toBe("RB-RENAMED-7");
    expect(byId.get(8)).toMatchObject({ location_id: 1, asset_last_seen: "2026-11-21T00:00:00.000Z" });
    expect(byId.get(ASSETS + 1)?.asset_external_key).toBe("RB-NEW");
    for (const row of expected) {
      if (row.asset_id === 7 || row.asset_id === 8) continue;
      const now = byId.get(row.asset_id);
      expect(now?.asset_external_key).toBe(row.asset_external_key);
      expect(now?.asset_deleted_at).toBe(row.asset_deleted_at);
      expect(now?.asset_last_seen).toBe(row.asset_last_seen);
      expect(now?.location_id).toBe(row.location_id);
    }
    expect((await report("location_id=2&limit=1")).json().data[0].location_external_key).toBe("HALL-2-RENAMED");
    expect((await report("location_id=1&limit=1")).json().data[0].location_external_key).toBe("HALL-1-LATE");
    expect((await report("q=rb-tag-30")).json().data.map((r: { asset_id: number }) => r.asset_id)).toEqual([30]);

    // The live consumers keep feeding the new tables.
    await pub.asset({ id: 9, key: "RB-AFTER-SWAP", version: 2, verb: "renamed" });
    expect((await report("asset_id=9")).json().data[0].asset_external_key).toBe("RB-AFTER-SWAP");
  });

  it("refuses to run two rebuilds at once", async () => {
    const logger = createLogger("rebuild-test", "silent");
    const deps = { nc: stack.nc, db, databaseUrl: stack.db.url, logger };
    const results = await Promise.allSettled([rebuildReadModel(deps), rebuildReadModel(deps)]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(String(rejected.reason)).toMatch(/another reporting rebuild is running/);
  });

  it("npm run -s reporting:rebuild prints one JSON line of figures", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: stack.db.url, NATS_URL: stack.nats.url, LOG_LEVEL: "warn" };
    delete env.REPORTING_DATABASE_URL;
    const { stdout } = await promisify(execFile)("npm", ["run", "-s", "reporting:rebuild"], { cwd: root, env, timeout: 25_000 });
    const lines = stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const figures = JSON.parse(lines[0]!);
    expect(figures).toMatchObject({ status: "ok", report_rows: ASSETS + 1, locations: 2 });
    expect(typeof figures.swap_ms).toBe("number");
    expect((await report("asset_id=9")).json().data[0].asset_external_key).toBe("RB-AFTER-SWAP");
  });
});
