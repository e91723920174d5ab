/**
 * Retention of scan idempotency keys (services/tracking/src/scans/scan-key-retention.ts):
 * a key of a scan without event_id (its stream sequence) goes once its message
 * is acknowledged and gone from SCANS; event_id keys, and the keys of messages
 * that could still be delivered, stay.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger, DURABLES, STREAMS } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
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
  (await context.sql.query<{ key: string }>(`SELECT key FROM tracking.scan_keys WHERE org_id = $1 ORDER BY key`, [orgId])).rows.map((r) => r.key);

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
    expect(before.filter((k) => k.startsWith("s:"))).toHaveLength(5);
    expect(before).toContain("e:keys-evt-1");
    // Acknowledged but still in the stream: a durable created anew would deliver them again.
    expect(await through()).toBe(0);

    // The stream drops its first four scans (as its age limit would): those four may go.
    await jsm.streams.purge(STREAMS.SCANS.name, { seq: seqs[4]! });
    expect(await through()).toBe(seqs[4]! - 1);
    // A stream key above that (a message still deliverable) stays.
    const ahead = `s:${seqs[4]! + 1000}:1`;
    await context.sql.query(`INSERT INTO tracking.scan_keys (org_id, key) VALUES ($1, $2)`, [orgId, ahead]);
    // Batches of 2: the walk goes on from where each ended.
    expect(await pruneStreamKeys(client, await through(), 2)).toBe(4);
    const kept = [`s:${seqs[4]}:`, "e:keys-evt-1", ahead];
    const keptNow = await keysOf(orgId);
    expect(keptNow).toHaveLength(3);
    for (const k of kept) expect(keptNow.some((key) => key.startsWith(k)), k).toBe(true);
    expect(await pruneStreamKeys(client, await through(), 2)).toBe(0);

    // The worker: the stream drops the rest, then the prune runs by itself.
    await jsm.streams.purge(STREAMS.SCANS.name, { seq: Math.max(...seqs) + 1 });
    const worker = startScanKeyRetention({ db: client, logger: createLogger("scan-keys-test", "silent"), through, firstAfterMs: 0 });
    try {
      await eventually(async () => ((await keysOf(orgId)).length === 2 ? true : undefined), 10_000, 50);
      expect(await keysOf(orgId)).toEqual(["e:keys-evt-1", ahead].sort());
    } finally {
      await worker.stop();
    }
  });
});
