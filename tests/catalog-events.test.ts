/**
 * Catalog events: every change published to CATALOG through the outbox with
 * Nats-Msg-Id, a per-entity version, the full view; a crash between commit and
 * publish is repaired by the relay on restart, exactly once. Also the position
 * seam: tracking's asset.moved events set the position, newer only, silently.
 */
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import {
  CatalogEvent,
  connectNats,
  createLogger,
  createPool,
  decodeJson,
  DURABLES,
  encodeJson,
  STREAMS,
  waitForConsumer,
  type RunningService,
} from "@whereabouts/shared";
import { eventually, readDeadLetters } from "@whereabouts/shared/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCatalog } from "../services/catalog/src/app.ts";
import { startStack, type Stack } from "./harness.ts";
import { apiClient, type ApiCall } from "./openapi-validator.ts";

let stack: Stack;
let jsm: JetStreamManager;

beforeAll(async () => {
  stack = await startStack({ label: "catalog_events", services: ["catalog"] });
  jsm = await jetstreamManager(stack.nc);
});
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Stored {
  subject: string;
  msgId: string | undefined;
  event: CatalogEvent;
}

/** Every CATALOG message of one organization, in stream order. */
async function eventsOf(orgId: number): Promise<Stored[]> {
  const info = await jsm.streams.info("CATALOG");
  const out: Stored[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const msg = await jsm.streams.getMessage("CATALOG", { seq }).catch(() => null);
    if (!msg || !msg.subject.startsWith(`catalog.events.${orgId}.`)) continue;
    out.push({ subject: msg.subject, msgId: msg.header?.get("Nats-Msg-Id"), event: CatalogEvent.parse(decodeJson(msg.data)) });
  }
  return out;
}

async function tenant(name: string): Promise<{ orgId: number; api: ApiCall }> {
  const t = await stack.tenant(name);
  return { orgId: t.orgId, api: apiClient(stack, t.auth) };
}

describe("published events", () => {
  it("publishes each change before replying, with Nats-Msg-Id = event_id and per-entity versions", async () => {
    const { orgId, api } = await tenant("Events Org");
    const created = (await api<Body>("POST", "/api/v1/assets", { name: "a", tags: [{ tag_type: "rfid", value: "EV-1" }] })).body.data;
    const id = created.id;
    const tagId = created.tags[0].id;
    const updated = (await api<Body>("PATCH", `/api/v1/assets/${id}`, { name: "b" })).body.data;
    await api("PATCH", `/api/v1/assets/${id}`, { name: "b" }); // no-op: no event
    await api("POST", `/api/v1/assets/${id}/rename`, { external_key: "EV-RENAMED" });
    await api("POST", `/api/v1/assets/${id}/rename`, { external_key: "EV-RENAMED" }); // same value: no event
    await api("DELETE", `/api/v1/assets/${id}/tags/${tagId}`);
    const tag2 = (await api<Body>("POST", `/api/v1/assets/${id}/tags`, { tag_type: "ble", value: "EV-2" })).body.data;
    await api("DELETE", `/api/v1/assets/${id}`);
    const location = (await api<Body>("POST", "/api/v1/locations", { name: "L" })).body.data;
    await api("PATCH", `/api/v1/locations/${location.id}`, { description: "d" });
    await api("POST", `/api/v1/locations/${location.id}/rename`, { external_key: "EV-LOC" });
    await api("DELETE", `/api/v1/locations/${location.id}`);

    // No polling: each reply was sent after its events were stored.
    const events = await eventsOf(orgId);
    expect(events.map((e) => [e.event.entity, e.event.verb, e.event.entity_version])).toEqual([
      ["asset", "created", 1],
      ["tag", "attached", 1],
      ["asset", "updated", 2],
      ["asset", "renamed", 3],
      ["tag", "detached", 2],
      ["tag", "attached", 1],
      ["tag", "detached", 2],
      ["asset", "deleted", 4],
      ["location", "created", 1],
      ["location", "updated", 2],
      ["location", "renamed", 3],
      ["location", "deleted", 4],
    ]);
    for (const { subject, msgId, event } of events) {
      expect(subject).toBe(`catalog.events.${orgId}.${event.entity}.${event.verb}`);
      expect(msgId).toBe(event.event_id);
      expect(event).toMatchObject({ version: 1, org_id: orgId });
    }
    // `created` carries the record as the reply showed it, its tags included.
    expect(events[0]!.event.data).toEqual(created);
    expect(events[2]!.event.data).toEqual(updated);
    expect(events[1]!.event).toMatchObject({ entity_id: tagId, data: { owner_type: "asset", owner_id: id, deleted_at: null } });
    expect(events[6]!.event).toMatchObject({ entity_id: tag2.id, data: { deleted_at: expect.any(String) } });
    expect(events[7]!.event.data).toMatchObject({ id, external_key: "EV-RENAMED", deleted_at: expect.any(String), tags: [] });
    expect(new Set(events.map((e) => e.event.event_id)).size).toBe(events.length);

    // Every published event's outbox row gets marked (in batches, after the replies).
    const pool = createPool(stack.db.url, 1);
    try {
      await eventually(async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n, count(published_at)::int AS marked FROM catalog.outbox_events WHERE org_id = $1`,
          [orgId],
        );
        return rows[0].n === events.length && rows[0].marked === events.length ? true : undefined;
      }, 10_000);
    } finally {
      await pool.end();
    }
  });

  it("publishes nothing for a rejected change", async () => {
    const { orgId, api } = await tenant("Rejected Org");
    await api("POST", "/api/v1/assets", { name: "" });
    await api("POST", "/api/v1/assets", { name: "x", external_key: "SAME" });
    await api("POST", "/api/v1/assets", { name: "x", external_key: "SAME" });
    expect((await eventsOf(orgId)).map((e) => e.event.verb)).toEqual(["created"]);
  });
});

describe("outbox relay", () => {
  it("delivers, exactly once, an event a crash left unpublished after commit", async () => {
    const { orgId, api } = await tenant("Crash Org");
    const logger = createLogger("crash-test", "silent");
    await stack.stopService("catalog");
    const nc = await connectNats({ url: stack.nats.url, name: "catalog-crashing", logger });
    let crashed: RunningService | undefined;
    try {
      crashed = await startCatalog({
        nc,
        logger,
        databaseUrl: stack.db.url,
        // The process "dies" after its commit, before JetStream has the event.
        publish: async () => {
          throw new Error("killed between commit and publish");
        },
        relayIntervalMs: 60_000,
      });
      const res = await api<Body>("POST", "/api/v1/assets", { name: "survivor", tags: [{ tag_type: "rfid", value: "CRASH-1" }] });
      expect(res.status).toBe(201);
      expect(await eventsOf(orgId)).toEqual([]);
    } finally {
      await crashed?.stop();
    }

    // Restart: the relay publishes what the outbox holds, in order.
    await stack.startService("catalog");
    const events = await eventsOf(orgId);
    expect(events.map((e) => [e.event.entity, e.event.verb])).toEqual([
      ["asset", "created"],
      ["tag", "attached"],
    ]);
    const pool = createPool(stack.db.url, 1);
    try {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM catalog.outbox_events WHERE org_id = $1 AND published_at IS NULL`,
        [orgId],
      );
      expect(rows[0].n).toBe(0);
    } finally {
      await pool.end();
    }
    // Another restart publishes nothing again.
    await stack.stopService("catalog");
    await stack.startService("catalog");
    expect(await eventsOf(orgId)).toHaveLength(2);
    // And the service works normally afterwards.
    expect((await api("POST", "/api/v1/locations", { name: "after" })).status).toBe(201);
    expect(await eventsOf(orgId)).toHaveLength(3);
  });
});

describe("asset position from tracking", () => {
  it("applies only newer positions, without touching updated_at or emitting catalog events", async () => {
    const { orgId, api } = await tenant("Position Org");
    const a = (await api<Body>("POST", "/api/v1/assets", { name: "tracked" })).body.data;
    const l1 = (await api<Body>("POST", "/api/v1/locations", { name: "one", external_key: "ONE" })).body.data;
    const l2 = (await api<Body>("POST", "/api/v1/locations", { name: "two", external_key: "TWO" })).body.data;
    const before = (await eventsOf(orgId)).length;
    const js = jetstream(stack.nc);
    // Positions are eventually visible: each step waits until catalog's consumer applied it.
    const applied = async () =>
      waitForConsumer(await jetstreamManager(stack.nc), STREAMS.TRACKING.name, DURABLES.catalogTracking, 10_000);
    const move = async (locationId: number, observedAt: string, seq: number) => {
      await js.publish(
        `tracking.events.${orgId}.asset.moved`,
        encodeJson({
          version: 1,
          event_id: `moved:${orgId}:${a.id}:${seq}`,
          org_id: orgId,
          asset_id: a.id,
          location_id: locationId,
          observed_at: observedAt,
          seq,
        }),
      );
      await applied();
    };
    const position = async () => (await api<Body>("GET", `/api/v1/assets/${a.id}`)).body.data;

    await move(l1.id, "2026-01-01T10:00:00.000Z", 1);
    expect(await position()).toMatchObject({ location_id: l1.id, location_external_key: "ONE", updated_at: a.updated_at });
    // Older observation: ignored.
    await move(l2.id, "2026-01-01T09:00:00.000Z", 2);
    expect((await position()).location_id).toBe(l1.id);
    // Same instant, higher seq: applied; same instant lower seq: ignored.
    await move(l2.id, "2026-01-01T10:00:00.000Z", 3);
    expect((await position()).location_id).toBe(l2.id);
    await move(l1.id, "2026-01-01T10:00:00.000Z", 2);
    expect((await position()).location_id).toBe(l2.id);
    // Malformed events and other subjects never block the stream.
    await js.publish(`tracking.events.${orgId}.asset.moved`, encodeJson({ nonsense: true }));
    await js.publish(`tracking.events.${orgId}.asset.seen`, encodeJson({ version: 1 }));
    await applied();
    // The malformed one is kept, with its reason, on DEAD_LETTERS (seen messages are not catalog's).
    const letters = (await readDeadLetters(stack.nc, DURABLES.catalogTracking)).filter((l) => l.subject === `tracking.events.${orgId}.asset.moved`);
    expect(letters.map((l) => [l.reason, l.text])).toEqual([["malformed_event", JSON.stringify({ nonsense: true })]]);
    await move(l1.id, "2026-01-02T00:00:00.000Z", 4);
    const last = await position();
    expect(last).toMatchObject({ location_id: l1.id, updated_at: a.updated_at });
    expect(last.updated_at).toBe(a.updated_at);
    expect((await eventsOf(orgId)).length).toBe(before);
    // The location list filter and the delete check see it.
    const listed = await api<Body>("GET", `/api/v1/assets?location_external_key=ONE`);
    expect(listed.body.data.map((x: Body) => x.id)).toEqual([a.id]);
    expect((await api("DELETE", `/api/v1/locations/${l1.id}`)).status).toBe(409);
    expect((await api("DELETE", `/api/v1/locations/${l2.id}`)).status).toBe(204);
  });

  it("keeps applying positions across a restart (durable consumer)", async () => {
    const { orgId, api } = await tenant("Durable Org");
    const a = (await api<Body>("POST", "/api/v1/assets", { name: "tracked" })).body.data;
    const l = (await api<Body>("POST", "/api/v1/locations", { name: "here" })).body.data;
    await stack.stopService("catalog");
    await jetstream(stack.nc).publish(
      `tracking.events.${orgId}.asset.moved`,
      encodeJson({
        version: 1,
        event_id: `moved:${orgId}:${a.id}:1`,
        org_id: orgId,
        asset_id: a.id,
        location_id: l.id,
        observed_at: "2026-01-01T00:00:00.000Z",
        seq: 1,
      }),
    );
    await stack.startService("catalog");
    const got = await eventually(async () => {
      const res = await api<Body>("GET", `/api/v1/assets/${a.id}`);
      return res.body.data.location_id === l.id ? res.body.data : undefined;
    });
    expect(got.location_external_key).toBe(l.external_key);
  });
});
