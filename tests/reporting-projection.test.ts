/**
 * The read model: idempotent, per-entity version order, newest position wins
 * (observed_at, then seq), unusable events never block, and read-your-writes:
 * a report request made right after a catalog write was acknowledged sees it,
 * or gets 503 service_unavailable when reporting cannot catch up in time;
 * scan effects are eventually visible and never delay a read.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import pg from "pg";
import { catalogEventSubject, DURABLES, encodeJson, STREAMS, trackingEventSubject } from "@whereabouts/shared";
import { readDeadLetters } from "@whereabouts/shared/testing";
import { createEventPublisher, type EventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { SWAP_LOCK } from "../services/reporting/src/reporting-db.ts";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
let auth: Record<string, string>;
let pub: EventPublisher;
let nextId = 1;
const id = () => nextId++;

interface Row {
  asset_id: number;
  asset_external_key: string;
  location_id: number | null;
  location_external_key: string | null;
  asset_deleted_at: string | null;
  asset_last_seen: string;
}

async function rows(query: string): Promise<Row[]> {
  const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?${query}`, headers: auth });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
}
const row = async (assetId: number) => (await rows(`asset_id=${assetId}&include_deleted=true`))[0];

beforeAll(async () => {
  stack = await startStack({ label: "reporting_projection", services: ["reporting"], catchUpTimeoutMs: 2000 });
  const t = await stack.tenant("Projection");
  auth = t.auth;
  pub = createEventPublisher(stack.nc, t.orgId);
  await pub.location({ id: 1001, key: "L-ONE" });
  await pub.location({ id: 1002, key: "L-TWO" });
});
afterAll(async () => stack?.close());

describe("catalog events", () => {
  it("applies only newer entity versions (a stale event changes nothing)", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: "V-ONE", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    await pub.asset({ id: assetId, key: "V-THREE", version: 3, verb: "renamed" });
    await pub.asset({ id: assetId, key: "V-TWO", version: 2, verb: "renamed" });
    expect((await row(assetId))?.asset_external_key).toBe("V-THREE");
    await pub.asset({ id: assetId, key: "V-THREE", version: 4, deletedAt: "2026-11-20T11:00:00.123Z" });
    await pub.asset({ id: assetId, key: "V-THREE", version: 3 });
    expect(await row(assetId)).toMatchObject({ asset_deleted_at: "2026-11-20T11:00:00.123Z" });
    expect(await rows(`asset_id=${assetId}`)).toEqual([]);
  });

  it("is idempotent: the same event delivered twice (new message id) changes nothing more", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: "IDEM-1", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    const before = await row(assetId);
    await pub.scannedAsset({ id: assetId, key: "IDEM-1", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    expect(await row(assetId)).toEqual(before);
  });

  it("location renames and deletes reach every row at that location; stale ones do not", async () => {
    const locationId = 1100 + id();
    await pub.location({ id: locationId, key: "REN-OLD" });
    const [x, y] = [id(), id()];
    await pub.scannedAsset({ id: x, key: `REN-A-${x}`, locationId, observedAt: "2026-11-20T10:00:00.000Z" });
    await pub.scannedAsset({ id: y, key: `REN-B-${y}`, locationId, observedAt: "2026-11-20T10:00:01.000Z" });
    await pub.location({ id: locationId, key: "REN-NEW", version: 2, verb: "renamed" });
    await pub.location({ id: locationId, key: "REN-OLD", version: 1 });
    const renamed = await rows(`location_id=${locationId}`);
    expect(renamed.map((r) => r.location_external_key)).toEqual(["REN-NEW", "REN-NEW"]);
    expect(await rows("location_external_key=REN-OLD")).toEqual([]);
    await pub.location({ id: locationId, key: "REN-NEW", version: 3, deletedAt: "2026-11-20T12:00:00.000Z" });
    const deleted = await rows(`location_id=${locationId}`);
    expect(deleted.map((r) => [r.location_id, r.location_external_key])).toEqual([
      [locationId, null],
      [locationId, null],
    ]);
  });

  it("tags: attach, detach, a stale attach after the detach, and tags known only from an asset event", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: `TAGGED-${assetId}`, locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    await pub.tag({ id: 9000 + assetId, assetId, value: "Zebra-Value-77" });
    expect((await rows("q=zebra-value")).map((r) => r.asset_id)).toEqual([assetId]);
    await pub.tag({ id: 9000 + assetId, assetId, value: "Zebra-Value-77", version: 2, deletedAt: "2026-11-20T10:00:00.000Z" });
    expect(await rows("q=zebra-value")).toEqual([]);
    await pub.tag({ id: 9000 + assetId, assetId, value: "Zebra-Value-77", version: 1 });
    expect(await rows("q=zebra-value")).toEqual([]);

    const other = id();
    await pub.scannedAsset({
      id: other,
      key: `EMBED-${other}`,
      locationId: 1001,
      observedAt: "2026-11-20T10:00:00.000Z",
      tags: [{ id: 9500 + other, value: "Embedded-Okapi" }],
    });
    expect((await rows("q=okapi")).map((r) => r.asset_id)).toEqual([other]);
  });

  it("a scan of an asset reporting has no catalog record for yet shows once the record arrives", async () => {
    const assetId = id();
    await pub.position({ assetId, locationId: 1002, observedAt: "2026-11-20T10:00:00.000Z", seq: 1 });
    expect(await row(assetId)).toBeUndefined();
    await pub.asset({ id: assetId, key: `LATE-CAT-${assetId}` });
    expect(await row(assetId)).toMatchObject({ location_id: 1002, asset_last_seen: "2026-11-20T10:00:00.000Z" });
  });
});

describe("positions", () => {
  it("a late scan never overwrites a newer position", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: `LATE-${assetId}`, locationId: 1001, observedAt: "2026-11-20T10:05:00.000Z", seq: 5 });
    await pub.position({ assetId, locationId: 1002, observedAt: "2026-11-20T10:00:00.000Z", seq: 9 });
    expect(await row(assetId)).toMatchObject({ location_id: 1001, asset_last_seen: "2026-11-20T10:05:00.000Z" });
    await pub.position({ assetId, locationId: 1002, observedAt: "2026-11-20T10:06:00.000Z", seq: 10 });
    expect(await row(assetId)).toMatchObject({ location_id: 1002, asset_last_seen: "2026-11-20T10:06:00.000Z" });
  });

  it("ties on observed_at go to the later-ingested scan (seq), in either arrival order", async () => {
    const assetId = id();
    const t = "2026-11-20T10:00:00.000Z";
    await pub.scannedAsset({ id: assetId, key: `TIE-${assetId}`, locationId: 1001, observedAt: t, seq: 4 });
    await pub.position({ assetId, locationId: 1002, observedAt: t, seq: 3 });
    expect((await row(assetId))?.location_id).toBe(1001);
    await pub.position({ assetId, locationId: 1002, observedAt: t, seq: 6 });
    expect((await row(assetId))?.location_id).toBe(1002);
  });

  it("orders by microseconds, not only the milliseconds shown", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: `MICRO-${assetId}`, locationId: 1001, observedAt: "2026-11-20T10:00:00.000500Z", seq: 1 });
    await pub.position({ assetId, locationId: 1002, observedAt: "2026-11-20T10:00:00.000100Z", seq: 2 });
    expect(await row(assetId)).toMatchObject({ location_id: 1001, asset_last_seen: "2026-11-20T10:00:00.000Z" });
  });

  it("asset.seen advances asset_last_seen; offsets are converted to UTC", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: `SEEN-${assetId}`, locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    await pub.position({ assetId, locationId: 1001, observedAt: "2026-11-20T12:30:00.250+02:00", seq: 2, verb: "seen" });
    expect(await row(assetId)).toMatchObject({ location_id: 1001, asset_last_seen: "2026-11-20T10:30:00.250Z" });
  });

  it("applies many events for one asset in one batch in order", async () => {
    const assetId = id();
    await pub.asset({ id: assetId, key: `BURST-${assetId}` });
    const js = jetstream(stack.nc);
    const acks = [];
    for (let i = 0; i < 200; i++) {
      const second = String(i % 60).padStart(2, "0");
      const minute = String(Math.floor(i / 60)).padStart(2, "0");
      const event = {
        version: 1, event_id: randomUUID(), org_id: pub.orgId, asset_id: assetId,
        location_id: i % 2 ? 1001 : 1002, observed_at: `2026-11-20T11:${minute}:${second}.000Z`, seq: i + 1,
      };
      acks.push(js.publish(trackingEventSubject(pub.orgId, "asset", "moved"), encodeJson(event), { msgID: event.event_id }));
    }
    await Promise.all(acks);
    await pub.positionsApplied();
    expect(await row(assetId)).toMatchObject({ location_id: 1001, asset_last_seen: "2026-11-20T11:03:19.000Z" });
  });
});

describe("total_count", () => {
  it("stays exact through creates, scans, deletes and validity changes (maintained counts + validity windows)", async () => {
    const t = await stack.tenant("Counts");
    const p = createEventPublisher(stack.nc, t.orgId);
    await p.location({ id: 1, key: "C-LOC" });
    const sql = new pg.Client({ connectionString: stack.db.url });
    await sql.connect();
    const direct = async (includeDeleted: boolean) =>
      Number(
        (
          await sql.query(
            `SELECT count(*) AS n FROM reporting.assets WHERE org_id = $1 AND scanned AND external_key IS NOT NULL
                AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now()) ${includeDeleted ? "" : "AND deleted_at IS NULL"}`,
            [t.orgId],
          )
        ).rows[0].n,
      );
    const check = async () => {
      for (const includeDeleted of [false, true]) {
        const res = await stack.gateway.inject({
          method: "GET",
          url: `/api/v1/reports/asset-locations?limit=1&include_deleted=${includeDeleted}`,
          headers: t.auth,
        });
        expect(res.json().total_count).toBe(await direct(includeDeleted));
      }
    };
    const versions = new Map<number, number>();
    const next = (assetId: number) => {
      const v = (versions.get(assetId) ?? 0) + 1;
      versions.set(assetId, v);
      return v;
    };
    let seq = 0;
    const scan = (assetId: number) =>
      p.position({ assetId, locationId: 1, observedAt: new Date(Date.UTC(2026, 10, 20, 10, 0, ++seq)).toISOString(), seq });
    try {
      for (let round = 0; round < 40; round++) {
        const assetId = 1 + (round % 12);
        const key = `CNT-${assetId}`;
        switch (round % 8) {
          case 0: await p.asset({ id: assetId, key, version: next(assetId) }); break;
          case 1: await scan(assetId); break;
          case 2: await p.asset({ id: assetId, key, version: next(assetId), validTo: "2099-01-01T00:00:00.000Z" }); break;
          case 3: await p.asset({ id: assetId, key, version: next(assetId), validFrom: "2099-01-01T00:00:00.000Z" }); break;
          case 4: await p.asset({ id: assetId, key, version: next(assetId), validTo: "2025-01-01T00:00:00.000Z", validFrom: "2024-01-01T00:00:00.000Z" }); break;
          case 5: await p.asset({ id: assetId, key, version: next(assetId), deletedAt: "2026-01-01T00:00:00.000Z" }); break;
          case 6: await scan(assetId); await p.asset({ id: assetId, key, version: next(assetId) }); break;
          case 7: await p.asset({ id: assetId, key, version: 1 }); break; // stale: no change
        }
        await check();
      }
      expect(await direct(false)).toBeGreaterThan(0);
    } finally {
      await sql.end();
    }
  });
});

describe("unusable events", () => {
  it("are dead-lettered with their reason and terminated, without blocking the stream or read-your-writes", async () => {
    const js = jetstream(stack.nc);
    await js.publish(catalogEventSubject(pub.orgId, "asset", "created"), new TextEncoder().encode("{not json"));
    await js.publish(catalogEventSubject(pub.orgId, "asset", "created"), encodeJson({ entity: "asset", version: 1 }));
    await js.publish(trackingEventSubject(pub.orgId, "asset", "moved"), encodeJson({ asset_id: "x" }));
    await js.publish(catalogEventSubject(pub.orgId, "widget", "created"), encodeJson({ entity: "widget" }));
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: `AFTER-POISON-${assetId}`, locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    expect((await row(assetId))?.asset_external_key).toBe(`AFTER-POISON-${assetId}`);
    const jsm = await jetstreamManager(stack.nc);
    for (const [stream, durable] of [
      [STREAMS.CATALOG.name, DURABLES.reportingCatalog],
      [STREAMS.TRACKING.name, DURABLES.reportingTracking],
    ] as const) {
      const info = await jsm.consumers.info(stream, durable);
      expect(info.num_ack_pending + info.num_pending).toBe(0);
      expect(info.config.filter_subject ?? "").toBe("");
    }
    const catalogLetters = await readDeadLetters(stack.nc, DURABLES.reportingCatalog);
    // An entity it does not know (a newer catalog's) is not poison: acked and ignored.
    expect(catalogLetters.map((l) => l.text)).toEqual(["{not json", JSON.stringify({ entity: "asset", version: 1 })]);
    const trackingLetters = await readDeadLetters(stack.nc, DURABLES.reportingTracking);
    expect(trackingLetters.map((l) => [l.reason, l.subject])).toEqual([["malformed_event", `tracking.events.${pub.orgId}.asset.moved`]]);
  });
});

describe("read-your-writes", () => {
  it("every request right after an acknowledged catalog write sees it (225 renames, deletes, tags); moves once applied", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: "RYW-0", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    let version = 1;
    for (let i = 1; i <= 75; i++) {
      await pub.asset({ id: assetId, key: `RYW-${i}`, version: ++version, verb: "renamed" });
      expect((await row(assetId))?.asset_external_key).toBe(`RYW-${i}`);
      const observedAt = new Date(Date.parse("2026-11-20T10:00:00.000Z") + i * 1000).toISOString();
      // Scan effects carry no read-your-writes promise: position() waits until reporting applied it.
      await pub.position({ assetId, locationId: i % 2 ? 1002 : 1001, observedAt, seq: i + 1 });
      expect(await row(assetId)).toMatchObject({ location_id: i % 2 ? 1002 : 1001, asset_last_seen: observedAt });
      await pub.tag({ id: 20_000 + i, assetId, value: `ryw-tag-${i}-x` });
      expect((await rows(`q=ryw-tag-${i}-x`)).map((r) => r.asset_id)).toEqual([assetId]);
      await pub.asset({ id: assetId, key: `RYW-${i}`, version: ++version, deletedAt: "2026-11-20T10:00:00.000Z" });
      expect(await rows(`asset_id=${assetId}`)).toEqual([]);
      await pub.asset({ id: assetId, key: `RYW-${i}`, version: ++version });
    }
  });

  it("answers 503 service_unavailable with Retry-After when it cannot catch up in time, then recovers", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: "STUCK-1", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    // Hold the swap lock exclusively: the live consumer cannot commit.
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      await client.query("SELECT pg_advisory_lock(hashtext($1))", [SWAP_LOCK]);
      await pub.asset({ id: assetId, key: "STUCK-2", version: 2, verb: "renamed" });
      const started = Date.now();
      const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?asset_id=${assetId}`, headers: auth });
      expect(res.statusCode).toBe(503);
      expect(res.headers["retry-after"]).toBe("1");
      expect(res.json().error).toMatchObject({ type: "service_unavailable", title: "Service unavailable", status: 503 });
      expect(Date.now() - started).toBeLessThan(4000);
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [SWAP_LOCK]);
      await client.end();
    }
    expect((await row(assetId))?.asset_external_key).toBe("STUCK-2");
  });

  it("is never held behind scan processing: positions not applied yet do not delay a read", async () => {
    const assetId = id();
    await pub.scannedAsset({ id: assetId, key: "SCAN-LAG", locationId: 1001, observedAt: "2026-11-20T10:00:00.000Z" });
    const lagging = createEventPublisher(stack.nc, pub.orgId, { awaitPositions: false });
    // A read first: it waits for every catalog write so far, so none is pending once the consumers stop
    // (on a slow machine the catalog events of the setup may still be on their way).
    const settled = await stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?asset_id=${assetId}`, headers: auth });
    expect(settled.statusCode).toBe(200);
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      // Both consumers are stuck; only scan data is pending.
      await client.query("SELECT pg_advisory_lock(hashtext($1))", [SWAP_LOCK]);
      for (let i = 1; i <= 20; i++) {
        await lagging.position({ assetId, locationId: 1002, observedAt: `2026-11-20T10:00:${String(i).padStart(2, "0")}.000Z`, seq: i + 1 });
      }
      const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?asset_id=${assetId}`, headers: auth });
      expect(res.statusCode).toBe(200);
      expect(res.json().data[0]).toMatchObject({ location_id: 1001, asset_last_seen: "2026-11-20T10:00:00.000Z" });
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [SWAP_LOCK]);
      await client.end();
    }
    await pub.positionsApplied();
    expect(await row(assetId)).toMatchObject({ location_id: 1002, asset_last_seen: "2026-11-20T10:00:20.000Z" });
  });
});
