/**
 * Tracking ingestion against a real nats-server and Postgres: scans become
 * history rows and positions, position events are published, bad scans are
 * dead-lettered with a reason, the catalog replica follows CATALOG (versions,
 * rebuild) and is caught up before every batch. The catalog service is not
 * running: the tests publish its events themselves.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { decodeRpcReply, DURABLES, encodeJson, scanSubject, type AssetHistoryItem } from "@whereabouts/shared";
import { eventually, readDeadLetters, testCatalogEventHead, testTagRecord } from "@whereabouts/shared/testing";
import type pg from "pg";
import type { Stack } from "./harness.ts";
import { startTrackingContext, type TrackingContext } from "./tracking-support.ts";
import {
  deadLetters,
  positionEvents,
  publishScan,
  readStream,
  type CatalogFixture,
} from "../services/tracking/src/testing/tracking-fixtures.ts";

let stack: Stack;
let cat: CatalogFixture;
let orgId: number;
let auth: Record<string, string>;
let sql: pg.Client;
let nextId = 100;
const id = () => nextId++;

let context: TrackingContext | undefined;
beforeAll(async () => {
  context = await startTrackingContext("tracking_ingest");
  ({ stack, cat, orgId, auth, sql } = context);
});
afterAll(async () => context?.close());

async function history(assetId: number, query = ""): Promise<{ status: number; body: { data: AssetHistoryItem[]; total_count: number } }> {
  const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${assetId}/history${query}`, headers: auth });
  return { status: res.statusCode, body: res.json() };
}

/** Waits until the asset's history has exactly `count` rows. */
async function historyOf(assetId: number, count: number, query = "?sort=event_observed_at&limit=200") {
  return eventually(async () => {
    const res = await history(assetId, query);
    return res.status === 200 && res.body.total_count === count ? res.body.data : undefined;
  });
}

async function metrics() {
  const envelope = { request_id: "metrics", principal: { key_id: 0, org_id: null, scopes: [] }, method: "GET", route: "", path: "", params: {}, query: {}, body: null };
  const msg = await stack.nc.request("tracking.metrics", encodeJson(envelope), { timeout: 2000 });
  return decodeRpcReply(msg).body as {
    scans: { deadLettered: Record<string, number>; tagsUnresolved: number; scansDuplicate: number };
  };
}

/** A live location and an asset with one rfid tag, all in the replica. */
async function seed(org = orgId) {
  const location = { id: id(), external_key: `LOC-${nextId}` };
  const asset = { id: id() };
  const tag = { id: id(), value: `TAG-${nextId}`, owner_type: "asset" as const, owner_id: asset.id };
  await cat.location(org, location);
  await cat.asset(org, asset);
  await cat.tag(org, tag);
  return { location, asset, tag };
}

const scan = (observedAt: string, location: object, values: string[], extra: object = {}) => ({
  observed_at: observedAt,
  location,
  tags: values.map((value) => ({ tag_type: "rfid", value })),
  ...extra,
});

describe("scan ingestion", () => {
  it("writes a history row and the position, and publishes moved then seen", async () => {
    const { location, asset, tag } = await seed();
    const other = { id: id(), external_key: `LOC-${nextId}` };
    await cat.location(orgId, other);

    await publishScan(stack.nc, orgId, scan("2026-01-01T10:00:00Z", { external_key: location.external_key }, [tag.value]));
    const rows = await historyOf(asset.id, 1);
    expect(rows).toEqual([
      { event_observed_at: "2026-01-01T10:00:00.000Z", location_id: location.id, location_external_key: location.external_key, duration_seconds: null },
    ]);

    // Same place later: last seen only. Elsewhere later: moved.
    await publishScan(stack.nc, orgId, scan("2026-01-01T10:05:00Z", { id: location.id }, [tag.value]));
    await historyOf(asset.id, 2);
    await publishScan(stack.nc, orgId, scan("2026-01-01T10:10:00Z", { id: other.id }, [tag.value]));
    await historyOf(asset.id, 3);

    const events = await eventually(async () => {
      const all = (await positionEvents(stack.nc, orgId)).filter((e) => e.event.asset_id === asset.id);
      return all.length === 3 ? all : undefined;
    });
    expect(events.map((e) => [e.verb, e.event.location_id, e.event.observed_at])).toEqual([
      ["moved", location.id, "2026-01-01T10:00:00.000000Z"],
      ["seen", location.id, "2026-01-01T10:05:00.000000Z"],
      ["moved", other.id, "2026-01-01T10:10:00.000000Z"],
    ]);
    expect(events[2]!.event).toMatchObject({ version: 1, org_id: orgId, previous_location_id: location.id });
    const { rows: positions } = await sql.query("SELECT location_id FROM tracking.positions WHERE org_id = $1 AND asset_id = $2", [orgId, asset.id]);
    expect(positions).toEqual([{ location_id: other.id }]);
  });

  it("a late scan adds history and leaves the position alone", async () => {
    const { location, asset, tag } = await seed();
    const early = { id: id(), external_key: `LOC-${nextId}` };
    await cat.location(orgId, early);
    await publishScan(stack.nc, orgId, scan("2026-02-01T12:00:00Z", { id: location.id }, [tag.value]));
    await historyOf(asset.id, 1);
    await publishScan(stack.nc, orgId, scan("2026-02-01T08:00:00Z", { id: early.id }, [tag.value]));
    const rows = await historyOf(asset.id, 2);
    expect(rows.map((r) => r.location_id)).toEqual([early.id, location.id]);
    const { rows: positions } = await sql.query("SELECT location_id FROM tracking.positions WHERE org_id = $1 AND asset_id = $2", [orgId, asset.id]);
    expect(positions).toEqual([{ location_id: location.id }]);
    const events = (await positionEvents(stack.nc, orgId)).filter((e) => e.event.asset_id === asset.id);
    expect(events.map((e) => e.event.location_id)).toEqual([location.id]);
  });

  it("on a tie of observed_at the later-ingested scan holds the position", async () => {
    const { location, asset, tag } = await seed();
    const second = { id: id(), external_key: `LOC-${nextId}` };
    await cat.location(orgId, second);
    await publishScan(stack.nc, orgId, scan("2026-02-02T12:00:00Z", { id: location.id }, [tag.value]));
    await historyOf(asset.id, 1);
    await publishScan(stack.nc, orgId, scan("2026-02-02T12:00:00Z", { id: second.id }, [tag.value]));
    const rows = await historyOf(asset.id, 2);
    expect(rows.map((r) => r.location_id)).toEqual([location.id, second.id]);
    const { rows: positions } = await sql.query("SELECT location_id FROM tracking.positions WHERE org_id = $1 AND asset_id = $2", [orgId, asset.id]);
    expect(positions).toEqual([{ location_id: second.id }]);
  });

  it("resolves the location by external key, id, or a tag attached to it", async () => {
    const { location, asset, tag } = await seed();
    const locationTag = { id: id(), tag_type: "ble", value: `LT-${nextId}`, owner_type: "location" as const, owner_id: location.id };
    await cat.tag(orgId, locationTag);
    await publishScan(stack.nc, orgId, scan("2026-03-01T00:00:01Z", { external_key: location.external_key }, [tag.value]));
    await publishScan(stack.nc, orgId, scan("2026-03-01T00:00:02Z", { id: location.id }, [tag.value]));
    await publishScan(stack.nc, orgId, scan("2026-03-01T00:00:03Z", { tag_type: "ble", value: locationTag.value }, [tag.value]));
    const rows = await historyOf(asset.id, 3);
    expect(rows.every((r) => r.location_id === location.id)).toBe(true);
  });

  it("converts observed_at to UTC and truncates to microseconds", async () => {
    const { location, asset, tag } = await seed();
    await publishScan(stack.nc, orgId, scan("2026-03-02T12:00:00.123456789+02:00", { id: location.id }, [tag.value]));
    const rows = await historyOf(asset.id, 1);
    expect(rows[0]!.event_observed_at).toBe("2026-03-02T10:00:00.123Z");
    const { rows: stored } = await sql.query("SELECT observed_key::text AS k FROM tracking.history WHERE asset_id = $1", [asset.id]);
    const micros = BigInt(Date.UTC(2026, 2, 2, 10, 0, 0, 123)) * 1000n + 456n;
    expect(stored).toEqual([{ k: String(micros * 16n) }]);
  });

  it("one row per asset per scan, several assets per scan; unresolved tags are counted and skipped", async () => {
    const a = await seed();
    const b = { id: id() };
    const bTags = [{ id: id(), value: `B1-${nextId}` }, { id: id(), value: `B2-${nextId}` }];
    await cat.asset(orgId, b);
    for (const t of bTags) await cat.tag(orgId, { ...t, owner_type: "asset", owner_id: b.id });
    // Tags that must not resolve: inactive, expired, not yet effective, detached, on a location, unknown.
    const inactiveAsset = { id: id() };
    await cat.asset(orgId, inactiveAsset);
    const bad = [
      { id: id(), value: `INACT-${nextId}`, is_active: false },
      { id: id(), value: `EXP-${nextId}`, valid_to: "2021-01-01T00:00:00Z" },
      { id: id(), value: `FUT-${nextId}`, valid_from: "2999-01-01T00:00:00Z" },
      { id: id(), value: `DET-${nextId}`, deleted_at: "2021-01-01T00:00:00Z" },
    ];
    for (const t of bad) await cat.tag(orgId, { ...t, owner_type: "asset", owner_id: inactiveAsset.id });
    await cat.tag(orgId, { id: id(), value: `ONLOC-${nextId}`, owner_type: "location", owner_id: a.location.id });
    const before = (await metrics()).scans.tagsUnresolved;

    await publishScan(
      stack.nc,
      orgId,
      scan("2026-03-03T00:00:00Z", { id: a.location.id }, [
        a.tag.value,
        bTags[0]!.value,
        bTags[1]!.value,
        ...bad.map((t) => t.value),
        `ONLOC-${nextId}`,
        "NOPE",
      ]),
    );
    expect(await historyOf(a.asset.id, 1)).toHaveLength(1);
    expect(await historyOf(b.id, 1)).toHaveLength(1); // two tags, one asset: one row
    expect((await history(inactiveAsset.id)).body.total_count).toBe(0);
    expect((await metrics()).scans.tagsUnresolved - before).toBe(6);
  });

  it("announces the positions of a batch in one message per organization, not one per asset", async () => {
    const orgMessages = async () => (await readStream(stack.nc, "TRACKING", `tracking.events.${orgId}.asset.*`)).length;
    const location = { id: id(), external_key: `LOC-${nextId}` };
    await cat.location(orgId, location);
    const tags: string[] = [];
    for (let i = 0; i < 12; i++) {
      const asset = { id: id() };
      await cat.asset(orgId, asset);
      const value = `MANY-${nextId}-${i}`;
      await cat.tag(orgId, { id: id(), value, owner_type: "asset", owner_id: asset.id });
      tags.push(value);
    }
    const before = await orgMessages();
    const eventsBefore = (await positionEvents(stack.nc, orgId)).length;
    await publishScan(stack.nc, orgId, scan("2026-03-04T00:00:00Z", { id: location.id }, tags));
    const events = await eventually(async () => {
      const all = await positionEvents(stack.nc, orgId);
      return all.length >= eventsBefore + 12 ? all.slice(eventsBefore) : undefined;
    });
    expect(events.map((e) => e.verb)).toEqual(Array(12).fill("moved"));
    expect(new Set(events.map((e) => e.event.asset_id)).size).toBe(12);
    expect((await orgMessages()) - before).toBe(1);

    // Read again at the same place: sightings, in one message outside catalog's filter (asset.*).
    const sightingsBefore = (await readStream(stack.nc, "TRACKING", `tracking.events.${orgId}.sightings.positions`)).length;
    await publishScan(stack.nc, orgId, scan("2026-03-04T00:00:01Z", { id: location.id }, tags));
    const seen = await eventually(async () => {
      const all = await positionEvents(stack.nc, orgId);
      return all.length >= eventsBefore + 24 ? all.slice(eventsBefore + 12) : undefined;
    });
    expect(seen.map((e) => e.verb)).toEqual(Array(12).fill("seen"));
    expect((await readStream(stack.nc, "TRACKING", `tracking.events.${orgId}.sightings.positions`)).length - sightingsBefore).toBe(1);
    expect((await orgMessages()) - before).toBe(1);
  });

  it("orders more than 16 scans of one asset at one microsecond no further: the 17th is dead-lettered", async () => {
    const { location, asset, tag } = await seed();
    const before = (await metrics()).scans.deadLettered.processing_failed!;
    const js = jetstream(stack.nc);
    await Promise.all(
      Array.from({ length: 17 }, () =>
        js.publish(scanSubject(orgId, "burst"), encodeJson(scan("2026-03-03T12:00:00.000001Z", { id: location.id }, [tag.value]))),
      ),
    );
    expect(await historyOf(asset.id, 16)).toHaveLength(16);
    await eventually(async () => ((await metrics()).scans.deadLettered.processing_failed! - before === 1 ? true : undefined));
  });

  it("is idempotent by event_id per organization", async () => {
    const { location, asset, tag } = await seed();
    const payload = scan("2026-03-04T00:00:00Z", { id: location.id }, [tag.value], { event_id: `evt-${nextId}` });
    await publishScan(stack.nc, orgId, payload);
    await publishScan(stack.nc, orgId, payload);
    await publishScan(stack.nc, orgId, { ...payload, observed_at: "2026-03-05T00:00:00Z" });
    await eventually(async () => ((await metrics()).scans.scansDuplicate >= 2 ? true : undefined));
    expect(await historyOf(asset.id, 1)).toHaveLength(1);

    // The same event_id in another organization is another event.
    const other = await stack.tenant("Other");
    const seeded = await seed(other.orgId);
    await publishScan(stack.nc, other.orgId, { ...payload, location: { id: seeded.location.id }, tags: [{ tag_type: "rfid", value: seeded.tag.value }] });
    await eventually(async () => ((await sql.query("SELECT 1 FROM tracking.history WHERE asset_id = $1", [seeded.asset.id])).rowCount === 1 ? true : undefined));
  });

  it("a scan delivered again as a first delivery (as from a broker that lost its consumer state) announces its asset's position again", async () => {
    const { location, asset, tag } = await seed();
    const payload = scan("2026-03-06T00:00:00Z", { id: location.id }, [tag.value], { event_id: `again-${nextId}` });
    const announced = async () => (await positionEvents(stack.nc, orgId)).filter((e) => e.event.asset_id === asset.id);
    await publishScan(stack.nc, orgId, payload);
    // Announced before the next scan is sent: two scans in one batch are announced once (the newest state).
    await eventually(async () => ((await announced()).length === 1 ? true : undefined));
    await publishScan(stack.nc, orgId, scan("2026-03-06T00:01:00Z", { id: location.id }, [tag.value]));
    const before = await eventually(async () => {
      const events = await announced();
      return events.length === 2 ? events : undefined;
    });
    expect(before.map((e) => e.verb)).toEqual(["moved", "seen"]);
    // The first scan once more: a new stream message, so JetStream delivers it
    // with a delivery count of 1, yet its key is already claimed. Its asset's
    // current position is announced again (as `moved`: a new message).
    await publishScan(stack.nc, orgId, payload);
    const after = await eventually(async () => {
      const events = await announced();
      return events.length > before.length ? events : undefined;
    });
    expect(after.at(-1)!.verb).toBe("moved");
    expect(after.at(-1)!.event).toMatchObject({ asset_id: asset.id, location_id: location.id, seq: before[1]!.event.seq });
    expect(await historyOf(asset.id, 2)).toHaveLength(2);
  });
});

describe("dead letters", () => {
  it("refuses bad scans to scans.dlq.<org> with the reason, counts them, and keeps going", async () => {
    const { location, asset, tag } = await seed();
    const deletedLocation = { id: id(), external_key: `DEL-${nextId}`, deleted_at: "2025-01-01T00:00:00Z" };
    await cat.location(orgId, deletedLocation);
    const strangerOrg = 999_999;
    const good = scan("2026-04-01T00:00:00Z", { id: location.id }, [tag.value]);
    const cases: Array<[string | number, unknown, string]> = [
      [orgId, "{not json", "invalid_json"],
      [orgId, { ...good, observed_at: "2026-04-01" }, "invalid_schema"],
      [orgId, { ...good, observed_at: "2026-02-30T00:00:00Z" }, "invalid_schema"],
      [orgId, { ...good, tags: [] }, "invalid_schema"],
      [orgId, { ...good, extra: 1 }, "invalid_schema"],
      [orgId, { ...good, location: { external_key: "NOWHERE" } }, "unknown_location"],
      [orgId, { ...good, location: { id: deletedLocation.id } }, "unknown_location"],
      [orgId, { ...good, tags: [{ tag_type: "rfid", value: "NOBODY" }] }, "no_resolved_tags"],
      [strangerOrg, good, "unknown_org"],
      ["acme", good, "invalid_subject"],
    ];
    const before = (await metrics()).scans.deadLettered;
    const earlier = (await deadLetters(stack.nc)).length;
    for (const [org, payload] of cases) await publishScan(stack.nc, org, payload);
    await publishScan(stack.nc, orgId, good);
    expect(await historyOf(asset.id, 1)).toHaveLength(1);

    const letters = await eventually(async () => {
      const all = (await deadLetters(stack.nc)).slice(earlier);
      return all.length >= cases.length ? all : undefined;
    });
    expect(letters.map((l) => l.reason)).toEqual(cases.map((c) => c[2]));
    expect(letters.map((l) => l.subject)).toEqual(cases.map(([org]) => `scans.dlq.${org === "acme" ? "unknown" : org}`));
    expect(letters[0]!.text).toBe("{not json");
    expect(letters[0]!.headers["Whereabouts-DLQ-Subject"]).toBe(scanSubject(orgId, "reader-1"));
    const after = (await metrics()).scans.deadLettered;
    for (const reason of new Set(cases.map((c) => c[2]))) {
      expect(after[reason]! - before[reason]!).toBe(cases.filter((c) => c[2] === reason).length);
    }
    // Nothing left pending on the durable.
    const info = await eventually(async () => {
      const i = await (await import("@nats-io/jetstream")).jetstreamManager(stack.nc).then((m) => m.consumers.info("SCANS", "tracking-scans"));
      return i.num_ack_pending === 0 && i.num_pending === 0 ? i : undefined;
    });
    expect(info.num_redelivered).toBe(0);
  });
});

describe("catalog replica", () => {
  it("catalog writes come first: a tag attached then scanned at once is never dead-lettered", async () => {
    const location = { id: id(), external_key: `FIRST-${nextId}` };
    await cat.location(orgId, location);
    const before = await deadLetters(stack.nc);
    const rounds = 300;
    const assets: number[] = [];
    const js = jetstream(stack.nc);
    for (let i = 0; i < rounds; i++) {
      const assetId = id();
      assets.push(assetId);
      await cat.asset(orgId, { id: assetId });
      await cat.tag(orgId, { id: id(), value: `FAST-${assetId}`, owner_type: "asset", owner_id: assetId });
      await js.publish(scanSubject(orgId, "fast"), encodeJson(scan("2026-05-01T00:00:00Z", { id: location.id }, [`FAST-${assetId}`])));
    }
    await eventually(
      async () => {
        const { rows } = await sql.query("SELECT count(*)::int AS n FROM tracking.history WHERE org_id = $1 AND asset_id = ANY($2::int[])", [orgId, assets]);
        return rows[0].n === rounds ? true : undefined;
      },
      20_000,
    );
    expect((await deadLetters(stack.nc)).length).toBe(before.length);
  });

  it("applies each entity only when its version is newer", async () => {
    const { location, asset, tag } = await seed();
    await cat.location(orgId, { ...location, external_key: "RENAMED-NEW" }, { verb: "renamed", version: 3 });
    await cat.location(orgId, { ...location, external_key: "RENAMED-OLD" }, { verb: "renamed", version: 2 });
    await publishScan(stack.nc, orgId, scan("2026-05-02T00:00:00Z", { external_key: "RENAMED-NEW" }, [tag.value]));
    const rows = await historyOf(asset.id, 1);
    expect(rows[0]!.location_external_key).toBe("RENAMED-NEW");
    const { rows: held } = await sql.query("SELECT external_key, version FROM tracking.locations WHERE org_id = $1 AND id = $2", [orgId, location.id]);
    expect(held).toEqual([{ external_key: "RENAMED-NEW", version: 3 }]);
  });

  it("a malformed catalog event is counted, dead-lettered with its reason and skipped; catch-up does not wait on it", async () => {
    const js = jetstream(stack.nc);
    await js.publish(`catalog.events.${orgId}.tag.attached`, new TextEncoder().encode("{garbage"));
    await js.publish(`catalog.events.${orgId}.tag.attached`, encodeJson({ version: 1, entity: "tag" }));
    // Well formed but for its instant (only the replica's timestamp check refuses it), alongside good events.
    const badInstant = { ...testCatalogEventHead(orgId, 999_999, 1, "attached"), entity: "tag", data: { ...testTagRecord({ id: 999_999, value: "BAD-INSTANT", owner_type: "asset", owner_id: 999_999 }, "2026-01-01T00:00:00.000Z"), valid_from: "soon" } };
    await js.publish(`catalog.events.${orgId}.tag.attached`, encodeJson(badInstant));
    const { location, asset, tag } = await seed();
    await publishScan(stack.nc, orgId, scan("2026-05-02T12:00:00Z", { id: location.id }, [tag.value]));
    expect(await historyOf(asset.id, 1)).toHaveLength(1);
    const replica = (await metrics()) as unknown as { replica: { catalogEventsRejected: number } };
    expect(replica.replica.catalogEventsRejected).toBe(3);
    const letters = await readDeadLetters(stack.nc, DURABLES.trackingCatalog);
    expect(letters.map((l) => [l.reason, l.subject, l.text])).toEqual([
      ["malformed_event", `catalog.events.${orgId}.tag.attached`, "{garbage"],
      ["malformed_event", `catalog.events.${orgId}.tag.attached`, JSON.stringify({ version: 1, entity: "tag" })],
      ["malformed_event", `catalog.events.${orgId}.tag.attached`, JSON.stringify(badInstant)],
    ]);
    const { rows: stored } = await sql.query("SELECT count(*)::int AS n FROM tracking.tags WHERE org_id = $1 AND id = 999999", [orgId]);
    expect(stored[0].n).toBe(0);
    expect(letters.every((l) => l.detail!.length > 0)).toBe(true);
  });

  it("rebuilds the replica from the stream when the database lost it", async () => {
    const { location, asset, tag } = await seed();
    await stack.stopService("tracking");
    await sql.query("TRUNCATE tracking.orgs, tracking.locations, tracking.assets, tracking.tags, tracking.stream_offsets");
    await stack.startService("tracking");
    await publishScan(stack.nc, orgId, scan("2026-05-03T00:00:00Z", { id: location.id }, [tag.value]));
    expect(await historyOf(asset.id, 1)).toHaveLength(1);
    const { rows } = await sql.query("SELECT count(*)::int AS n FROM tracking.tags WHERE org_id = $1", [orgId]);
    expect(rows[0].n).toBeGreaterThan(300);
  });
});
