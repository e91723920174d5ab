/**
 * Retention of scan idempotency keys (services/tracking/src/scans/scan-key-retention.ts):
 * a key of a scan without event_id (its stream sequence) goes once its message
 * is acknowledged and gone from SCANS; event_id keys, and the keys of messages
 * that could still be delivered, stay. The keys written before the `seq`
 * column existed get theirs from the migration (it is generated from the key).
 */
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import pg from "pg";
import { createLogger, DURABLES, migrate, migrationsDir, STREAMS } from "@whereabouts/shared";
import { createTestDatabase, eventually } from "@whereabouts/shared/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishScan } from "../services/tracking/src/testing/tracking-fixtures.ts";
import { createTrackingClient, type TrackingClient } from "../services/tracking/src/db/tracking-db.ts";
import { pruneStreamKeys, startScanKeyRetention, undeliverableThrough } from "../services/tracking/src/scans/scan-key-retention.ts";
import { startTrackingContext, type TrackingContext } from "./tracking-support.ts";

let context: TrackingContext;
let client: TrackingClient;

beforeAll(async () => {
  context = await startTrackingContext("tracking_scan_keys");
  client = createTrackingClient(context.stack.db.url, 2);
});
afterAll(async () => {
  await client?.$disconnect();
  await context?.close();
});

const keysOf = async (orgId: number) =>
  (
    await context.sql.query<{ key: string; seq: string | null }>(`SELECT key, seq::text AS seq FROM tracking.scan_keys WHERE org_id = $1 ORDER BY key`, [orgId])
  ).rows;

describe("scan key retention", () => {
  it("removes stream-sequence keys of scans acknowledged and gone from SCANS, in batches, and keeps the others", async () => {
    const { cat, orgId, stack } = context;
    await cat.location(orgId, { id: 10, external_key: "KEYS-DOCK" });
    await cat.asset(orgId, { id: 11 });
    await cat.tag(orgId, { id: 12, value: "KEYS-TAG", owner_type: "asset", owner_id: 11 });
    const scan = (minute: number, extra: object = {}) => ({
      observed_at: `2026-01-01T10:0${minute}:00Z`,
      location: { external_key: "KEYS-DOCK" },
      tags: [{ tag_type: "rfid", value: "KEYS-TAG" }],
      ...extra,
    });
    const seqs: number[] = [];
    for (let m = 0; m < 5; m++) seqs.push(await publishScan(stack.nc, orgId, scan(m)));
    seqs.push(await publishScan(stack.nc, orgId, scan(5, { event_id: "keys-evt-1" })));
    const jsm = await jetstreamManager(stack.nc);
    const through = () => undeliverableThrough(jsm, STREAMS.SCANS.name, DURABLES.trackingScans);
    const ackFloor = async () => (await jsm.consumers.info(STREAMS.SCANS.name, DURABLES.trackingScans)).ack_floor.stream_seq;
    // Processed and acknowledged: the durable's ack floor reaches the last scan.
    await eventually(async () => ((await ackFloor()) >= Math.max(...seqs) ? true : undefined));
    const before = await keysOf(orgId);
    // Each stream key carries its message's sequence (generated from the key); the event_id key none.
    expect(before.filter((k) => k.key.startsWith("s:")).map((k) => Number(k.seq)).sort((a, b) => a - b)).toEqual(seqs.slice(0, 5));
    for (const k of before.filter((k) => k.key.startsWith("s:"))) expect(k.key.startsWith(`s:${k.seq}:`), k.key).toBe(true);
    expect(before).toContainEqual({ key: "e:keys-evt-1", seq: null });
    // Acknowledged but still in the stream: a durable created anew would deliver them again.
    expect(await through()).toBe(0);

    // The stream drops its first four scans (as its age limit would): those four may go.
    await jsm.streams.purge(STREAMS.SCANS.name, { seq: seqs[4]! });
    expect(await through()).toBe(seqs[4]! - 1);
    // A stream key above that (a message still deliverable) stays.
    const ahead = { key: `s:${seqs[4]! + 1000}:1`, seq: String(seqs[4]! + 1000) };
    await context.sql.query(`INSERT INTO tracking.scan_keys (org_id, key) VALUES ($1, $2)`, [orgId, ahead.key]);
    // Batches of 2: each statement goes on from where the one before ended.
    expect(await pruneStreamKeys(client, await through(), 2)).toBe(4);
    const keptNow = await keysOf(orgId);
    expect(keptNow.map((k) => k.key.replace(/:\d+$/, ":")).sort()).toEqual([`s:${seqs[4]}:`, ahead.key.replace(/:\d+$/, ":"), "e:keys-evt-1"].sort());
    expect(await pruneStreamKeys(client, await through(), 2)).toBe(0);

    // The worker: the stream drops the rest, then the prune runs by itself.
    await jsm.streams.purge(STREAMS.SCANS.name, { seq: Math.max(...seqs) + 1 });
    const worker = startScanKeyRetention({ db: client, logger: createLogger("scan-keys-test", "silent"), through, firstAfterMs: 0 });
    try {
      await eventually(async () => ((await keysOf(orgId)).length === 2 ? true : undefined), 10_000, 50);
      const left = await keysOf(orgId);
      expect(left).toHaveLength(2);
      expect(left).toEqual(expect.arrayContaining([ahead, { key: "e:keys-evt-1", seq: null }]));
    } finally {
      await worker.stop();
    }
  });

  it("a batch that ends inside one sequence (keys of a stream created anew) leaves none of that sequence behind", async () => {
    const orgId = context.orgId;
    await context.sql.query(`DELETE FROM tracking.scan_keys WHERE org_id = $1`, [orgId]);
    // Sequence 7 three times over (three incarnations of the stream: the timestamp tells them apart), 8 once, 9 beyond.
    const rows = [
      ["s:7:100", 7],
      ["s:7:200", 7],
      ["s:7:300", 7],
      ["s:8:300", 8],
      ["s:9:300", 9],
    ] as const;
    for (const [key] of rows) await context.sql.query(`INSERT INTO tracking.scan_keys (org_id, key) VALUES ($1, $2)`, [orgId, key]);
    expect((await keysOf(orgId)).map((k) => Number(k.seq)).sort()).toEqual(rows.map(([, seq]) => seq));
    expect(await pruneStreamKeys(client, 8, 2)).toBe(4);
    expect(await keysOf(orgId)).toEqual([{ key: "s:9:300", seq: "9" }]);
  });

  it("the migration gives the keys written before it their sequence, and only the stream keys", async () => {
    const db = await createTestDatabase("tracking_scan_keys_migration");
    const dir = await mkdtemp(path.join(tmpdir(), "wa-scan-keys-"));
    const sql = new pg.Client({ connectionString: db.url });
    try {
      const all = (await readdir(migrationsDir("tracking"), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
      const added = all.findIndex((name) => name.endsWith("_scan_key_seq"));
      expect(added).toBeGreaterThan(0);
      for (const name of all.slice(0, added)) await cp(path.join(migrationsDir("tracking"), name), path.join(dir, name), { recursive: true });
      await migrate({ connectionString: db.url, schema: "tracking", migrationsDir: dir });
      await sql.connect();
      await sql.query(`INSERT INTO tracking.scan_keys (org_id, key) VALUES (1, 's:41:17'), (1, 's:1234567890123:18'), (2, 'e:s:99'), (2, 'e:evt-7'), (2, 's:x:1')`);

      const result = await migrate({ connectionString: db.url, schema: "tracking", migrationsDir: migrationsDir("tracking") });
      expect(result.applied[0]).toBe(all[added]);
      const { rows } = await sql.query<{ org_id: number; key: string; seq: string | null }>(
        `SELECT org_id, key, seq::text AS seq FROM tracking.scan_keys ORDER BY org_id, key`,
      );
      expect(rows).toHaveLength(5);
      expect(rows).toEqual(
        expect.arrayContaining([
          { org_id: 1, key: "s:1234567890123:18", seq: "1234567890123" },
          { org_id: 1, key: "s:41:17", seq: "41" },
          { org_id: 2, key: "e:evt-7", seq: null },
          { org_id: 2, key: "e:s:99", seq: null },
          // Not a key tracking writes: no sequence rather than a failed migration.
          { org_id: 2, key: "s:x:1", seq: null },
        ]),
      );
      // A writer that does not know the column (the previous version, during a rolling upgrade) fills it all the same.
      await sql.query(`INSERT INTO tracking.scan_keys (org_id, key) VALUES (3, 's:77:19')`);
      expect((await sql.query(`SELECT seq::text AS seq FROM tracking.scan_keys WHERE org_id = 3`)).rows).toEqual([{ seq: "77" }]);
      // Retention can find them through the sequence index (its partial predicate holds for the prune's clauses).
      await sql.query("SET enable_seqscan = off");
      const plan = (await sql.query<{ "QUERY PLAN": string }>(`EXPLAIN SELECT key FROM tracking.scan_keys WHERE seq IS NOT NULL AND seq >= 0 AND seq <= 50 ORDER BY seq LIMIT 10`)).rows
        .map((r) => r["QUERY PLAN"])
        .join("\n");
      expect(plan).toContain("scan_keys_seq_idx");
    } finally {
      await sql.end().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      await db.drop();
    }
  });
});
