/**
 * Tracking's announce step under a failed publish, batch by batch: a batch's
 * scans are committed, announcing their positions on TRACKING fails, the batch
 * is nak'ed, and its redelivery (alone, with newer or late scans of the same
 * assets, or after a later batch already announced) must still leave catalog
 * and the report on each asset's newest scan. The real catalog, reporting and
 * TRACKING stream; tracking's scan service is driven directly with the
 * deliveries each scenario needs, so the batches are exactly these (a chaos
 * run only meets them by chance), through a publisher whose failures the test
 * decides.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import {
  createLogger,
  createMetrics,
  DURABLES,
  encodeJson,
  scanSubject,
  PublishError,
  STREAMS,
  waitForConsumer,
} from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import pg from "pg";
import { startStack, type Stack } from "./harness.ts";
import { publishScan } from "../services/tracking/src/testing/tracking-fixtures.ts";
import { duplicateHistoryRows, historyRowCount } from "../services/tracking/src/testing/history-checks.ts";
import { createTrackingClient, type TrackingClient } from "../services/tracking/src/db/tracking-db.ts";
import { createPositionPublisher, type PositionPublisher } from "../services/tracking/src/scans/position-publisher.ts";
import { createScanCounters } from "../services/tracking/src/scans/scan-metrics.ts";
import { createScanService, type ScanService } from "../services/tracking/src/scans/scan-service.ts";

let stack: Stack;
let orgId: number;
let auth: Record<string, string>;
let sql: pg.Client;
let trackingDb: TrackingClient;
let realPositions: PositionPublisher;
const locations: Record<"dock" | "yard" | "gate", number> = { dock: 0, yard: 0, gate: 0 };
const keys = { dock: "ANN-DOCK", yard: "ANN-YARD", gate: "ANN-GATE" } as const;

/** Publishes through the real publisher, except the next `failures` calls, which fail as a lost ack does. */
function flakyPublisher() {
  let failures = 0;
  const publisher: PositionPublisher = {
    publish: (changes) => {
      if (failures > 0) {
        failures--;
        return Promise.reject(new PublishError("1 of 1 position messages not acknowledged in time"));
      }
      return realPositions.publish(changes);
    },
    close: () => undefined,
  };
  return { publisher, failNext: (n: number) => void (failures = n) };
}

let flaky: ReturnType<typeof flakyPublisher>;
let scans: ScanService;
let streamSeq = 1_000_000;

/** One delivery of a scan, as the consumer hands it over; records how it was settled. */
function delivery(payload: { event_id: string; observed_at: string; location: keyof typeof keys; tag: string }) {
  const settled: string[] = [];
  const data = encodeJson({
    event_id: payload.event_id,
    observed_at: payload.observed_at,
    location: { external_key: keys[payload.location] },
    tags: [{ tag_type: "rfid", value: payload.tag }],
  });
  const seq = streamSeq++;
  const make = (): JsMsg =>
    ({
      subject: scanSubject(orgId, "reader-1"),
      data,
      seq,
      timestampNanos: 1_700_000_000_000_000_000n + BigInt(seq),
      ack: () => void settled.push("ack"),
      nak: () => void settled.push("nak"),
      term: () => void settled.push("term"),
    }) as unknown as JsMsg;
  return { settled, make };
}

/** One batch through commit and announce. */
async function handle(...messages: JsMsg[]) {
  await scans.handleBatch(messages);
  await scans.drain();
}

async function call(method: "GET" | "POST", url: string, payload?: unknown) {
  const res = await stack.gateway.inject({
    method,
    url,
    headers: { ...auth, ...(payload === undefined ? {} : { "content-type": "application/json" }) },
    ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
  });
  return { status: res.statusCode, body: res.body ? res.json() : undefined };
}

let assetCount = 0;
/** The scenarios' assets, one each, placed at the dock before ingestion is driven by hand. */
const placed: Array<{ id: number; tag: string }> = [];
/** An asset with one tag, placed at the dock by a scan the running tracking processed. */
async function placedAsset(): Promise<{ id: number; tag: string }> {
  const n = ++assetCount;
  const tag = `ANN-TAG-${n}`;
  const created = await call("POST", "/api/v1/assets", { name: `Crate ${n}`, tags: [{ tag_type: "rfid", value: tag }] });
  expect(created.status).toBe(201);
  return { id: created.body.data.id as number, tag };
}

/** Both read models have applied everything on TRACKING. */
async function projectionsCaughtUp(): Promise<void> {
  const jsm = await jetstreamManager(stack.nc);
  await waitForConsumer(jsm, STREAMS.TRACKING.name, DURABLES.catalogTracking, 30_000);
  await waitForConsumer(jsm, STREAMS.TRACKING.name, DURABLES.reportingTracking, 30_000);
}

async function shown(assetId: number) {
  await projectionsCaughtUp();
  const asset = await call("GET", `/api/v1/assets/${assetId}`);
  const report = await call("GET", `/api/v1/reports/asset-locations?limit=200`);
  const row = (report.body.data as Array<{ asset_id: number; location_id: number | null; asset_last_seen: string }>).find((r) => r.asset_id === assetId);
  return { catalog: asset.body.data.location_id as number | null, report: row && { location: row.location_id, lastSeen: row.asset_last_seen } };
}

const history = async (assetId: number) => ({
  rows: await historyRowCount(sql, orgId, [assetId]),
  duplicated: await duplicateHistoryRows(sql, orgId, [assetId]),
});

const T = (minute: number) => `2026-12-13T08:${String(minute).padStart(2, "0")}:00.000Z`;

beforeAll(async () => {
  stack = await startStack({ label: "tracking_announce" });
  ({ orgId, auth } = await stack.tenant());
  sql = new pg.Client({ connectionString: stack.db.url });
  await sql.connect();
  for (const name of Object.keys(keys) as Array<keyof typeof keys>) {
    const res = await call("POST", "/api/v1/locations", { name, external_key: keys[name] });
    expect(res.status).toBe(201);
    locations[name] = res.body.data.id;
  }
  // The assets the scenarios use exist before tracking's replica is frozen.
  const warmups: Array<{ id: number; tag: string }> = [];
  for (let i = 0; i < 4; i++) warmups.push(await placedAsset());
  // One scan each through the running tracking: its replica knows them, catalog and the report show them at the dock.
  for (const a of warmups) {
    await publishScan(stack.nc, orgId, { event_id: `place-${a.id}`, observed_at: T(0), location: { external_key: keys.dock }, tags: [{ tag_type: "rfid", value: a.tag }] });
  }
  await eventually(async () => {
    for (const a of warmups) {
      const s = await shown(a.id);
      if (s.catalog !== locations.dock || s.report?.location !== locations.dock) return undefined;
    }
    return true;
  }, 30_000);
  placed.push(...warmups);
  // From here the test drives ingestion itself, on the same database.
  await stack.stopService("tracking");
  trackingDb = createTrackingClient(stack.db.url, 4);
  realPositions = createPositionPublisher(stack.nc, { ackTimeoutMs: 10_000 });
  flaky = flakyPublisher();
  scans = createScanService({
    db: trackingDb,
    js: jetstream(stack.nc),
    positions: flaky.publisher,
    // The replica is complete: nothing is written to the catalog during the scenarios.
    catchUp: async () => undefined,
    logger: createLogger("test", "silent"),
    counters: createScanCounters(createMetrics({ service: "tracking" })),
  });
});

afterAll(async () => {
  realPositions?.close();
  await trackingDb?.$disconnect();
  await sql?.end();
  await stack?.close();
});

describe("a committed batch whose announce failed", () => {
  it("is nak'ed, and its redelivery announces the positions it committed", async () => {
    const asset = placed[0]!;
    const s1 = delivery({ event_id: "a1", observed_at: T(1), location: "yard", tag: asset.tag });
    flaky.failNext(1);
    await handle(s1.make());
    expect(s1.settled).toEqual(["nak"]);
    // Committed all the same: the redelivery finds the scan recorded.
    expect(await history(asset.id)).toEqual({ rows: 2, duplicated: 0 });

    await handle(s1.make());
    expect(s1.settled).toEqual(["nak", "ack"]);
    expect(await shown(asset.id)).toEqual({ catalog: locations.yard, report: { location: locations.yard, lastSeen: T(1) } });
    expect(await history(asset.id)).toEqual({ rows: 2, duplicated: 0 });
  });

  it("redelivered together with a newer scan at the same place still moves the asset in catalog", async () => {
    const asset = placed[1]!;
    const s1 = delivery({ event_id: "b1", observed_at: T(1), location: "yard", tag: asset.tag });
    const s2 = delivery({ event_id: "b2", observed_at: T(2), location: "yard", tag: asset.tag });
    flaky.failNext(1);
    await handle(s1.make());
    expect(s1.settled).toEqual(["nak"]);

    // The newer scan only sees the asset where the lost announcement had moved it: on its own, a `seen`.
    await handle(s1.make(), s2.make());
    expect([s1.settled, s2.settled]).toEqual([["nak", "ack"], ["ack"]]);
    expect(await shown(asset.id)).toEqual({ catalog: locations.yard, report: { location: locations.yard, lastSeen: T(2) } });
    expect(await history(asset.id)).toEqual({ rows: 3, duplicated: 0 });
  });

  it("announced by a later batch first: the redelivery still brings catalog to the newest scan", async () => {
    const asset = placed[2]!;
    const s1 = delivery({ event_id: "c1", observed_at: T(1), location: "gate", tag: asset.tag });
    const s2 = delivery({ event_id: "c2", observed_at: T(2), location: "gate", tag: asset.tag });
    flaky.failNext(1);
    await handle(s1.make());
    // The next batch is announced before the redelivery comes.
    await handle(s2.make());
    expect(s2.settled).toEqual(["ack"]);

    await handle(s1.make());
    expect(s1.settled).toEqual(["nak", "ack"]);
    expect(await shown(asset.id)).toEqual({ catalog: locations.gate, report: { location: locations.gate, lastSeen: T(2) } });
    expect(await history(asset.id)).toEqual({ rows: 3, duplicated: 0 });
  });

  it("redelivered with a late scan: the late scan is recorded and never wins", async () => {
    const asset = placed[3]!;
    const s2 = delivery({ event_id: "d2", observed_at: T(2), location: "yard", tag: asset.tag });
    const late = delivery({ event_id: "d1", observed_at: T(1), location: "gate", tag: asset.tag });
    flaky.failNext(1);
    await handle(s2.make());
    expect(s2.settled).toEqual(["nak"]);

    await handle(s2.make(), late.make());
    expect([s2.settled, late.settled]).toEqual([["nak", "ack"], ["ack"]]);
    expect(await shown(asset.id)).toEqual({ catalog: locations.yard, report: { location: locations.yard, lastSeen: T(2) } });
    expect(await history(asset.id)).toEqual({ rows: 3, duplicated: 0 });

    // Delivered once more (a lost ack): nothing changes, nothing is recorded twice.
    await handle(s2.make(), late.make());
    expect(await shown(asset.id)).toEqual({ catalog: locations.yard, report: { location: locations.yard, lastSeen: T(2) } });
    expect(await history(asset.id)).toEqual({ rows: 3, duplicated: 0 });
  });
});
