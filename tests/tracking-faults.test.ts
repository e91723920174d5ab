/**
 * Tracking under faults, with a real nats-server and Postgres: the service
 * stopped while scans arrive, NATS restarted under it, a poison message in a
 * batch of good ones, and the process SIGKILLed in the middle of a batch.
 * Every scan must end up processed exactly once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { DURABLES, encodeJson, repoRoot, scanSubject, STREAMS } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import pg from "pg";
import type { Stack } from "./harness.ts";
import { startTrackingContext, type TrackingContext } from "./tracking-support.ts";
import {
  deadLetters,
  positionEvents,
  publishScan,
  type CatalogFixture,
} from "../services/tracking/src/testing/tracking-fixtures.ts";
import { duplicateHistoryRows, historyRowCount } from "../services/tracking/src/testing/history-checks.ts";
import { killChild } from "../scripts/bench/teardown.ts";

let stack: Stack;
let cat: CatalogFixture;
let orgId: number;
let auth: Record<string, string>;
let sql: pg.Client;
let nextId = 100;
const id = () => nextId++;

let context: TrackingContext | undefined;
beforeAll(async () => {
  context = await startTrackingContext("tracking_faults");
  ({ stack, cat, orgId, auth, sql } = context);
});
afterAll(async () => context?.close());

/** A location and `count` assets with one tag each. */
async function seed(count: number) {
  const location = { id: id(), external_key: `F-${nextId}` };
  await cat.location(orgId, location);
  const assets: Array<{ id: number; tag: string }> = [];
  for (let i = 0; i < count; i++) {
    const asset = { id: id(), tag: `F-${nextId}` };
    await cat.asset(orgId, { id: asset.id });
    await cat.tag(orgId, { id: id(), value: asset.tag, owner_type: "asset", owner_id: asset.id });
    assets.push(asset);
  }
  return { location, assets };
}

const rowCount = (assetIds: number[]) => historyRowCount(sql, orgId, assetIds);

/** Tracking's scan consumer has nothing pending and nothing delivered unacked: no redelivery is still to come. */
async function scansSettled(): Promise<void> {
  const jsm = await jetstreamManager(stack.nc);
  await eventually(async () => {
    const info = await jsm.consumers.info(STREAMS.SCANS.name, DURABLES.trackingScans).catch(() => undefined);
    return info && info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
  }, 60_000);
}
// Every scan in these tests has its own instant: a duplicate shows as a tie.
const duplicateRows = (assetIds: number[]) => duplicateHistoryRows(sql, orgId, assetIds);

const at = (i: number) => new Date(Date.UTC(2026, 6, 1) + i * 1000).toISOString();

describe("faults", () => {
  it("scans published while tracking is stopped are each processed once when it starts", async () => {
    const { location, assets } = await seed(10);
    await stack.stopService("tracking");
    const js = jetstream(stack.nc);
    for (let i = 0; i < 200; i++) {
      const asset = assets[i % assets.length]!;
      await js.publish(scanSubject(orgId, "r1"), encodeJson({ observed_at: at(i), location: { id: location.id }, tags: [{ tag_type: "rfid", value: asset.tag }] }));
    }
    expect(await rowCount(assets.map((a) => a.id))).toBe(0);
    await stack.startService("tracking");
    await eventually(async () => ((await rowCount(assets.map((a) => a.id))) === 200 ? true : undefined), 30_000);
    await scansSettled();
    expect(await rowCount(assets.map((a) => a.id))).toBe(200);
    expect(await duplicateRows(assets.map((a) => a.id))).toBe(0);
  });

  it("reconnects and resumes after NATS restarts", { timeout: 60_000 }, async () => {
    const { location, assets } = await seed(2);
    const ids = assets.map((a) => a.id);
    await publishScan(stack.nc, orgId, { observed_at: at(1), location: { id: location.id }, tags: [{ tag_type: "rfid", value: assets[0]!.tag }] });
    await eventually(async () => ((await rowCount(ids)) === 1 ? true : undefined), 20_000);

    const disconnected = (async () => {
      for await (const status of stack.nc.status()) if (status.type === "disconnect") return;
    })();
    await stack.nats.stop();
    await disconnected;
    await stack.nats.start();

    // The publisher reconnects too; retry until JetStream answers again.
    await eventually(
      async () =>
        publishScan(
          stack.nc,
          orgId,
          { event_id: "after-restart", observed_at: at(2), location: { id: location.id }, tags: [{ tag_type: "rfid", value: assets[1]!.tag }] },
          "reader-1",
          500,
        ),
      15_000,
      200,
    );
    await eventually(async () => ((await rowCount(ids)) === 2 ? true : undefined), 20_000);
    const res = await eventually(async () => {
      const r = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${assets[1]!.id}/history`, headers: auth });
      return r.statusCode === 200 ? r : undefined;
    }, 15_000, 200);
    expect(res.json().total_count).toBe(1);
  });

  it("a poison message among good ones is dead-lettered; the good ones are processed", async () => {
    const { location, assets } = await seed(5);
    const before = (await deadLetters(stack.nc)).length;
    const good = (i: number) => ({ observed_at: at(100 + i), location: { id: location.id }, tags: [{ tag_type: "rfid", value: assets[i]!.tag }] });
    const js = jetstream(stack.nc);
    // Published together so they share batches. The NUL in event_id passes the
    // schema but Postgres refuses it: only isolation gets the others through.
    const burst: unknown[] = [good(0), "{oops", good(1), { ...good(2), event_id: "nul\u0000id" }, good(3), { tags: "nope" }, good(4)];
    await Promise.all(burst.map((p) => js.publish(scanSubject(orgId, "r1"), typeof p === "string" ? new TextEncoder().encode(p) : encodeJson(p))));
    await eventually(async () => ((await rowCount(assets.map((a) => a.id))) === 4 ? true : undefined), 15_000);
    const letters = await eventually(async () => {
      const all = await deadLetters(stack.nc);
      return all.length - before >= 3 ? all.slice(before) : undefined;
    }, 15_000);
    expect(letters.map((l) => l.reason).sort()).toEqual(["invalid_json", "invalid_schema", "processing_failed"]);
    const { rows } = await sql.query("SELECT asset_id FROM tracking.history WHERE asset_id = $1", [assets[2]!.id]);
    expect(rows).toEqual([]);
  });

  it("tracking SIGKILLed in the middle of a batch loses and duplicates nothing", async () => {
    const { location, assets } = await seed(40);
    const ids = assets.map((a) => a.id);
    await stack.stopService("tracking");
    const env = {
      ...process.env,
      NATS_URL: stack.nats.url,
      DATABASE_URL: stack.db.url,
      LOG_LEVEL: "warn",
      OPS_PORT: "0",
      TRACKING_SCAN_ACK_WAIT_MS: "1500",
      TRACKING_SCAN_BATCH_SIZE: "100",
    };
    const children: ChildProcess[] = [];
    const startChild = () => {
      const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "services/tracking/src/main.ts")], {
        cwd: repoRoot,
        env,
        stdio: ["ignore", "ignore", "inherit"],
      });
      children.push(child);
      return child;
    };
    const kill = (child: ChildProcess) => killChild(child, "SIGKILL");

    try {
      // 1. Hold the batch inside its transaction (positions locked), then kill the process.
      const blocker = new pg.Client({ connectionString: stack.db.url });
      blocker.on("error", () => undefined);
      await blocker.connect();
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE tracking.positions IN SHARE MODE");
      const first = startChild();
      const js = jetstream(stack.nc);
      const scans = 1500;
      const perScan = 4;
      const acks = [];
      for (let i = 0; i < scans; i++) {
        const tags = Array.from({ length: perScan }, (_, k) => ({ tag_type: "rfid", value: assets[(i * perScan + k) % assets.length]!.tag }));
        // Half carry an event_id, half rely on the stream sequence.
        const payload = { observed_at: at(i), location: { id: location.id }, tags, ...(i % 2 ? { event_id: `kill-${i}` } : {}) };
        acks.push(js.publish(scanSubject(orgId, "r1"), encodeJson(payload)));
      }
      await Promise.all(acks);
      let activity: Array<{ state: string; wait_event_type: string | null; query: string }> = [];
      const blocked = await eventually(async () => {
        ({ rows: activity } = await sql.query(
          `SELECT state, wait_event_type, query FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()`,
        ));
        return activity.some((a) => a.wait_event_type === "Lock" && /tracking\.positions/.test(a.query)) ? true : undefined;
      }, 45_000).catch(() => false);
      expect(blocked, JSON.stringify(activity.map((a) => ({ ...a, query: a.query.slice(0, 60) })))).toBe(true);
      await kill(first);
      await blocker.query("ROLLBACK");
      await blocker.end();
      expect(await rowCount(ids)).toBe(0);

      // 2. Restart; kill again while batches are flowing; restart once more.
      const second = startChild();
      await eventually(async () => ((await rowCount(ids)) > 0 ? true : undefined), 45_000, 10);
      await kill(second);
      const partial = await rowCount(ids);
      startChild();
      const total = scans * perScan;
      await eventually(async () => ((await rowCount(ids)) === total ? true : undefined), 45_000);
      await scansSettled(); // every delivery acked: no redelivery can still land
      expect(await rowCount(ids)).toBe(total);
      expect(await duplicateRows(ids)).toBe(0);
      const { rows: keys } = await sql.query("SELECT count(*)::int AS n FROM tracking.scan_keys WHERE org_id = $1 AND (key LIKE 'e:kill-%' OR key LIKE 's:%')", [orgId]);
      expect(keys[0].n).toBeGreaterThanOrEqual(scans);
      expect(partial).toBeLessThanOrEqual(total);

      // Every asset's newest position was announced (nothing lost between commit and publish).
      const { rows: positions } = await sql.query("SELECT asset_id, location_id, seq FROM tracking.positions WHERE org_id = $1 AND asset_id = ANY($2::int[])", [orgId, ids]);
      const events = await positionEvents(stack.nc, orgId);
      for (const p of positions) {
        const newest = events.filter((e) => e.event.asset_id === p.asset_id).reduce((a, b) => (b.event.seq > a.event.seq ? b : a));
        expect(newest.event.seq).toBe(p.seq);
      }
    } finally {
      for (const child of children) await kill(child);
    }
  }, 180_000);
});
