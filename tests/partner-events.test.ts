/**
 * Events for partners (EXTENSIONS.md section 4) against a real stack: the
 * feed (types, cursor paging while events arrive, 410 past retention, tenant
 * isolation), webhooks (CRUD, the secret shown once and rotated, signatures
 * checked as a partner would, retries with backoff, a receiver that hangs,
 * the SSRF refusals) and replay. Receivers are real HTTP servers on loopback.
 */
import { createHmac } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PARTNER_EVENT_SCHEMA_VERSION, PartnerEvent, scanSubject } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { createReportingDb } from "../services/reporting/src/reporting-db.ts";
import { purgeExpiredEvents } from "../services/reporting/src/events/event-feed.ts";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;

beforeAll(async () => {
  stack = await startStack({ label: "partner_events", events: { allowPrivateTargets: true } });
  t = await stack.tenant("Events Org");
}, 120_000);
afterAll(async () => {
  for (const r of receivers) await r.close();
  await stack?.close();
});

interface Received {
  at: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A partner's endpoint: records every POST; `answer` decides the status (null: never answer). */
async function receiver(answer: (req: Received, n: number) => number | null = () => 200, headers: Record<string, string> = {}) {
  const got: Received[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      const entry = { at: Date.now(), headers: req.headers, body };
      got.push(entry);
      const status = answer(entry, got.length);
      if (status === null) held.push(res);
      else res.writeHead(status, headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const r = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    events: () => got.map((g) => JSON.parse(g.body) as { id: string; type: string; data: Record<string, unknown> }),
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  receivers.push(r);
  return r;
}
const receivers: Array<{ close(): Promise<void> }> = [];

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const api = async (method: string, url: string, body?: unknown, auth = t.auth) => {
  const res = await stack.gateway.inject({
    method: method as "GET",
    url,
    headers: { ...auth, ...(body === undefined ? {} : { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.body ? (res.json() as Body) : undefined, headers: res.headers };
};

type FeedEvent = { id: string; type: string; occurred_at: string; org_id: number; data: Body };

async function feed(query = "", auth = t.auth): Promise<{ data: FeedEvent[]; next_cursor: string }> {
  const res = await api("GET", `/api/v1/events${query}`, undefined, auth);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { data: FeedEvent[]; next_cursor: string };
}

/** Reads the whole feed from `after` on, page by page. */
async function readAll(after?: string, type = ""): Promise<{ events: FeedEvent[]; cursor: string }> {
  const events: FeedEvent[] = [];
  let cursor = after;
  for (;;) {
    const page = await feed(`?limit=200${cursor ? `&after=${cursor}` : ""}${type}`);
    events.push(...page.data);
    cursor = page.next_cursor;
    if (page.data.length < 200) return { events, cursor };
  }
}

async function scan(orgId: number, location: string, tag: string, observedAt: string) {
  await stack.nc.publish(scanSubject(orgId, "gate-1"), JSON.stringify({ observed_at: observedAt, location: { external_key: location }, tags: [{ tag_type: "rfid", value: tag }] }));
}

/** A partner's check of Whereabouts-Signature: HMAC-SHA256(secret, "<t>.<raw body>"), hex, any v1 entry. */
function partnerVerifies(header: string | undefined, secret: string, rawBody: string): boolean {
  if (!header) return false;
  const parts = header.split(",");
  const t = parts.find((p) => p.startsWith("t="))?.slice(2);
  if (!t || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest("hex");
  return parts.filter((p) => p.startsWith("v1=")).some((p) => p.slice(3) === expected);
}

describe("the event feed", () => {
  it("carries asset, location and tag changes as the API shows them, and asset.moved only when the location changes", async () => {
    const start = (await feed()).next_cursor;
    const dock = await api("POST", "/api/v1/locations", { name: "Dock", external_key: "EV-DOCK" });
    const yard = await api("POST", "/api/v1/locations", { name: "Yard", external_key: "EV-YARD" });
    const created = await api("POST", "/api/v1/assets", { name: "Pallet", external_key: "EV-PALLET", tags: [{ tag_type: "rfid", value: "EV-TAG-1" }] });
    expect(created.status).toBe(201);
    const id = created.body!.data.id as number;
    // Characters an array literal or JSON must escape, carried as written.
    const updated = await api("PATCH", `/api/v1/assets/${id}`, { name: 'Pallet "2", {x} \\ \u00e9', metadata: { note: 'a "b" \\ c', n: [1, { k: null }] } });
    const renamed = await api("POST", `/api/v1/assets/${id}/rename`, { external_key: "EV-PALLET-2" });
    const tag = await api("POST", `/api/v1/assets/${id}/tags`, { tag_type: "ble", value: "EV-BLE-1" });
    await api("DELETE", `/api/v1/assets/${id}/tags/${tag.body!.data.id}`);

    await scan(t.orgId, "EV-DOCK", "EV-TAG-1", "2026-11-20T10:00:00Z");
    await eventually(async () => ((await readAll(start, "&type=asset.moved")).events.length === 1 ? true : undefined), 20_000, 100);
    await scan(t.orgId, "EV-DOCK", "EV-TAG-1", "2026-11-20T10:01:00Z"); // a re-read at the same place
    await scan(t.orgId, "EV-YARD", "EV-TAG-1", "2026-11-20T10:02:00Z");
    const moves = await eventually(async () => {
      const got = (await readAll(start, "&type=asset.moved")).events;
      return got.length >= 2 ? got : undefined;
    }, 20_000, 100);
    // The re-read at the dock is seen by the report, yet it is no move.
    await eventually(async () => {
      const report = await api("GET", `/api/v1/reports/asset-locations?asset_id=${id}`);
      return report.body!.data[0]?.asset_last_seen?.startsWith("2026-11-20T10:02:00") ? true : undefined;
    }, 20_000, 100);
    const deleted = await api("DELETE", `/api/v1/assets/${id}`);
    expect(deleted.status).toBe(204);

    const { events } = await readAll(start);
    // Tags created with the asset are attached after it; deleting the asset detaches its tags first.
    expect(events.map((e) => e.type)).toEqual([
      "location.created",
      "location.created",
      "asset.created",
      "tag.attached",
      "asset.updated",
      "asset.renamed",
      "tag.attached",
      "tag.detached",
      "asset.moved",
      "asset.moved",
      "tag.detached",
      "asset.deleted",
    ]);
    for (const e of events) {
      expect(e.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
      expect(e.org_id).toBe(t.orgId);
      // Each matches its type's versioned schema (the envelope and its data), as published in packages/shared.
      const parsed = PartnerEvent.safeParse(e);
      expect(parsed.success, `${e.type}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    }
    expect(PARTNER_EVENT_SCHEMA_VERSION).toBe(1);
    // The schemas are strict enough to fail: a move without its destination is no asset.moved.
    const move = events.find((e) => e.type === "asset.moved")!;
    expect(PartnerEvent.safeParse({ ...move, data: { ...move.data, to_location_id: undefined } }).success).toBe(false);
    expect(events[0]!.data).toEqual(dock.body!.data);
    expect(events[1]!.data).toEqual(yard.body!.data);
    expect(events[2]!.data).toEqual(created.body!.data);
    expect(events[3]!.data).toMatchObject({ value: "EV-TAG-1", owner_type: "asset", owner_id: id });
    expect(events[4]!.data).toEqual(updated.body!.data);
    expect(events[4]!.data.name).toBe('Pallet "2", {x} \\ \u00e9');
    expect(events[5]!.data).toEqual(renamed.body!.data);
    expect(events[6]!.data).toMatchObject({ id: tag.body!.data.id, value: "EV-BLE-1", owner_type: "asset", owner_id: id });
    expect(events[10]!.data).toMatchObject({ value: "EV-TAG-1", owner_id: id });
    expect(moves.map((m) => m.data)).toEqual([
      {
        asset_id: id,
        asset_external_key: "EV-PALLET-2",
        from_location_id: null,
        from_location_external_key: null,
        to_location_id: dock.body!.data.id,
        to_location_external_key: "EV-DOCK",
        observed_at: "2026-11-20T10:00:00.000000Z",
      },
      {
        asset_id: id,
        asset_external_key: "EV-PALLET-2",
        from_location_id: dock.body!.data.id,
        from_location_external_key: "EV-DOCK",
        to_location_id: yard.body!.data.id,
        to_location_external_key: "EV-YARD",
        observed_at: "2026-11-20T10:02:00.000000Z",
      },
    ]);
    expect(events.at(-1)!.data.deleted_at).not.toBeNull();
  });

  it("pages oldest first by cursor while events keep arriving: nothing skipped, nothing twice", async () => {
    const start = (await feed()).next_cursor;
    const made: number[] = [];
    const create = async (n: number) => {
      for (let i = 0; i < n; i++) made.push((await api("POST", "/api/v1/assets", { name: `Paged ${made.length}` })).body!.data.id as number);
    };
    await create(5);
    const seen: FeedEvent[] = [];
    let cursor = start;
    for (let round = 0; round < 50 && seen.length < 12; round++) {
      const page = await feed(`?limit=2&after=${cursor}&type=asset.created`);
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data);
      cursor = page.next_cursor;
      if (round === 1) await create(7); // arrive mid-paging
    }
    expect(seen.map((e) => e.data.id)).toEqual(made);
    const empty = await feed(`?after=${cursor}&type=asset.created`);
    expect(empty.data).toEqual([]);
    expect(empty.next_cursor).toBe(cursor);
  });

  it("checks its query: unknown type, bad cursor, limit above 200, unknown key, offset", async () => {
    const bad = await api("GET", "/api/v1/events?type=asset.exploded&after=nope&limit=201&colour=red&offset=3");
    expect(bad.status).toBe(400);
    expect(bad.body!.error.type).toBe("validation_error");
    expect(bad.body!.error.fields.map((f: { field: string; code: string }) => [f.field, f.code]).sort()).toEqual(
      [
        ["after", "invalid_value"],
        ["colour", "unknown_field"],
        ["limit", "too_large"],
        ["offset", "unknown_field"],
        ["type", "invalid_value"],
      ].sort(),
    );
  });

  it("is isolated per organization and needs events:read", async () => {
    const other = await stack.tenant("Other Events Org");
    await api("POST", "/api/v1/assets", { name: "Theirs", external_key: "EV-THEIRS" }, other.auth);
    const mine = (await readAll()).events;
    expect(mine.some((e) => e.data.external_key === "EV-THEIRS")).toBe(false);
    const theirs = await eventually(async () => {
      const page = await feed("", other.auth);
      return page.data.length ? page.data : undefined;
    });
    expect(theirs.every((e) => e.org_id === other.orgId)).toBe(true);
    const { key } = await stack.createKey({ org: t.orgId, scopes: "assets:read" });
    const refused = await api("GET", "/api/v1/events", undefined, { authorization: `Bearer ${key}` });
    expect(refused.status).toBe(403);
  });

  it("answers 410 for a cursor older than what retention removed; a fresh read works", async () => {
    const org = await stack.tenant("Retention Org");
    await api("POST", "/api/v1/assets", { name: "Old news" }, org.auth);
    const first = await eventually(async () => {
      const page = await feed("", org.auth);
      return page.data.length ? page : undefined;
    });
    const before = (await feed("", org.auth)).next_cursor;
    const oldCursor = (await feed(`?limit=1`, org.auth)).data.length ? before : first.next_cursor;
    // Retention: everything recorded before now is past a window of 0 s.
    const db = createReportingDb(stack.db.url);
    try {
      expect(await purgeExpiredEvents(db, 0)).toBeGreaterThan(0);
    } finally {
      await db.$disconnect();
    }
    const start = await feed("", org.auth);
    expect(start.data).toEqual([]);
    // A cursor from before the removed events.
    const stale = await api("GET", `/api/v1/events?after=${encodeURIComponent(Buffer.from("e1.0").toString("base64url"))}`, undefined, org.auth);
    expect(stale.status).toBe(410);
    expect(stale.body!.error).toMatchObject({ type: "gone", title: "Gone", status: 410 });
    // A cursor at the end of what was read stays valid.
    expect((await api("GET", `/api/v1/events?after=${oldCursor}`, undefined, org.auth)).status).toBe(200);
  });
});

describe("webhooks", () => {
  it("CRUD: the secret is shown once; list, get, patch, delete; webhooks:write to change, events:read to read", async () => {
    const hook = await receiver();
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.created"], description: "ERP" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.headers.location).toBe(`/api/v1/webhooks/${created.body!.data.id}`);
    expect(created.body!.data).toMatchObject({ url: hook.url, types: ["asset.created"], description: "ERP" });
    expect(created.body!.data.secret).toMatch(/^whsec_/);
    const id = created.body!.data.id;
    const got = await api("GET", `/api/v1/webhooks/${id}`);
    expect(got.body!.data.secret).toBeUndefined();
    expect(got.body!.data).toEqual({ ...created.body!.data, secret: undefined });
    const list = await api("GET", "/api/v1/webhooks");
    expect(list.body).toMatchObject({ limit: 50, offset: 0 });
    expect(list.body!.data.map((w: { id: number }) => w.id)).toContain(id);
    expect(list.body!.total_count).toBe(list.body!.data.length);
    // Past the last page: no rows, and still the count.
    const past = await api("GET", `/api/v1/webhooks?offset=${list.body!.total_count}`);
    expect([past.body!.data, past.body!.total_count]).toEqual([[], list.body!.total_count]);
    const patched = await api("PATCH", `/api/v1/webhooks/${id}`, { types: ["asset.created", "asset.deleted"], description: null });
    expect(patched.body!.data).toMatchObject({ types: ["asset.created", "asset.deleted"], description: null });
    expect(patched.body!.data.secret).toBeUndefined();

    const bad = await api("POST", "/api/v1/webhooks", { url: "ftp://x", types: [], extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body!.error.fields.map((f: { field: string }) => f.field).sort()).toEqual(["extra", "types", "url"]);
    const unknownType = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.exploded"] });
    expect(unknownType.status).toBe(400);
    // Postgres text cannot hold NUL: a 400 naming the field, never a 500 (found by the HTTP fuzz test).
    const nul = await api("PATCH", `/api/v1/webhooks/${id}`, { description: "\u0000" });
    expect(nul.status, JSON.stringify(nul.body)).toBe(400);
    expect(nul.body!.error.fields.map((f: { field: string; code: string }) => [f.field, f.code])).toEqual([["description", "invalid_value"]]);
    const nulUrl = await api("POST", "/api/v1/webhooks", { url: `${hook.url}/a\u0000b`, types: ["asset.created"], description: "x\u0000" });
    expect(nulUrl.status).toBe(400);
    expect(nulUrl.body!.error.fields.map((f: { field: string }) => f.field).sort()).toEqual(["description", "url"]);

    const { key: reader } = await stack.createKey({ org: t.orgId, scopes: "events:read" });
    const readerAuth = { authorization: `Bearer ${reader}` };
    expect((await api("GET", `/api/v1/webhooks/${id}`, undefined, readerAuth)).status).toBe(200);
    expect((await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.created"] }, readerAuth)).status).toBe(403);

    const other = await stack.tenant("Other Hooks Org");
    expect((await api("GET", `/api/v1/webhooks/${id}`, undefined, other.auth)).status).toBe(404);
    expect((await api("GET", `/api/v1/webhooks/${id}/deliveries`, undefined, other.auth)).status).toBe(404);
    expect((await api("GET", "/api/v1/webhooks", undefined, other.auth)).body!.data).toEqual([]);

    expect((await api("DELETE", `/api/v1/webhooks/${id}`)).status).toBe(204);
    expect((await api("GET", `/api/v1/webhooks/${id}`)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/webhooks/${id}`)).status).toBe(404);
  });

  it("delivers signed events (checked as a partner would), and during a rotation signs with both secrets", async () => {
    const hook = await receiver();
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.created", "asset.updated"] });
    const { id, secret } = created.body!.data as { id: number; secret: string };
    const asset = await api("POST", "/api/v1/assets", { name: "Signed", external_key: "EV-SIGNED" });
    await eventually(async () => (hook.got.length >= 1 ? true : undefined), 20_000, 50);
    const first = hook.got[0]!;
    expect(partnerVerifies(first.headers["whereabouts-signature"] as string, secret, first.body)).toBe(true);
    expect(partnerVerifies(first.headers["whereabouts-signature"] as string, "whsec_wrong", first.body)).toBe(false);
    const event = JSON.parse(first.body);
    expect(event).toMatchObject({ type: "asset.created", org_id: t.orgId, data: asset.body!.data });
    expect(first.headers["whereabouts-event-id"]).toBe(event.id);
    expect(first.headers["whereabouts-event-type"]).toBe("asset.created");
    expect(first.headers["content-type"]).toBe("application/json");

    const rotated = await api("PATCH", `/api/v1/webhooks/${id}`, { rotate_secret: true });
    const fresh = rotated.body!.data.secret as string;
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(secret);
    await api("PATCH", `/api/v1/assets/${asset.body!.data.id}`, { name: "Signed again" });
    await eventually(async () => (hook.got.length >= 2 ? true : undefined), 20_000, 50);
    const second = hook.got[1]!;
    const header = second.headers["whereabouts-signature"] as string;
    expect(header.match(/v1=/g)).toHaveLength(2);
    expect(partnerVerifies(header, fresh, second.body)).toBe(true);
    expect(partnerVerifies(header, secret, second.body)).toBe(true);

    // The receiver has the body before the deliverer records the attempt's outcome.
    const log = await eventually(async () => {
      const res = await api("GET", `/api/v1/webhooks/${id}/deliveries`);
      return res.body!.total_count === 2 && res.body!.data[0].state === "delivered" ? res : undefined;
    });
    expect(log.body!.total_count).toBe(2);
    expect(log.body!.data[0], JSON.stringify({ log: log.body!.data, got: hook.events().map((e) => [e.id, e.type]) })).toMatchObject({ event_type: "asset.updated", attempt: 1, status_code: 200, state: "delivered", next_attempt_at: null });
    expect(log.body!.data[0].duration_ms).toBeGreaterThanOrEqual(0);
  });

  it("retries with backoff against a receiver that fails twice, then succeeds", async () => {
    const hook = await receiver((_, n) => (n <= 2 ? 500 : 204));
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["location.created"] });
    const id = created.body!.data.id;
    await api("POST", "/api/v1/locations", { name: "Retry", external_key: "EV-RETRY" });
    await eventually(async () => (hook.got.length >= 3 ? true : undefined), 30_000, 100);
    const gaps = [hook.got[1]!.at - hook.got[0]!.at, hook.got[2]!.at - hook.got[1]!.at];
    expect(gaps[0]).toBeGreaterThanOrEqual(1000);
    expect(gaps[1]).toBeGreaterThanOrEqual(2000);
    expect(new Set(hook.got.map((g) => g.headers["whereabouts-event-id"])).size).toBe(1);
    const log = await eventually(async () => {
      const res = await api("GET", `/api/v1/webhooks/${id}/deliveries`);
      return res.body!.total_count === 3 ? res.body! : undefined;
    });
    expect(log.data.map((d: Record<string, unknown>) => [d.attempt, d.status_code, d.state])).toEqual([
      [3, 204, "delivered"],
      [2, 500, "pending"],
      [1, 500, "pending"],
    ]);
    expect(log.data[2].next_attempt_at).not.toBeNull();
    expect((await api("GET", `/api/v1/webhooks/${id}/deliveries?state=pending`)).body!.total_count).toBe(2);
    const second = (await api("GET", `/api/v1/webhooks/${id}/deliveries?limit=1&offset=1`)).body!;
    expect([second.data.map((d: Record<string, unknown>) => d.attempt), second.total_count]).toEqual([[2], 3]);
    const past = (await api("GET", `/api/v1/webhooks/${id}/deliveries?offset=3`)).body!;
    expect([past.data, past.total_count]).toEqual([[], 3]);
  });

  it("a receiver that hangs past 10 s times out, and never delays another webhook", { timeout: 60_000 }, async () => {
    const hung = await receiver(() => null);
    const fine = await receiver();
    const slow = await api("POST", "/api/v1/webhooks", { url: hung.url, types: ["asset.created"] });
    await api("POST", "/api/v1/webhooks", { url: fine.url, types: ["asset.created"] });
    const began = Date.now();
    for (let i = 0; i < 5; i++) await api("POST", "/api/v1/assets", { name: `Hang ${i}` });
    await eventually(async () => (fine.got.length >= 5 ? true : undefined), 20_000, 50);
    expect(Date.now() - began).toBeLessThan(9_000);
    const attempt = await eventually(async () => {
      const res = await api("GET", `/api/v1/webhooks/${slow.body!.data.id}/deliveries`);
      return res.body!.data[0];
    }, 30_000, 200);
    expect(attempt).toMatchObject({ attempt: 1, status_code: null, state: "pending" });
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(10_000);
    expect(attempt.error).toMatch(/10000 ms/);
  });

  it("delivers an organization's events only to its own webhooks", async () => {
    const other = await stack.tenant("Other Delivery Org");
    const mine = await receiver();
    const theirs = await receiver();
    const myHook = await api("POST", "/api/v1/webhooks", { url: mine.url, types: ["location.created"] });
    const theirHook = await api("POST", "/api/v1/webhooks", { url: theirs.url, types: ["location.created"] }, other.auth);
    expect([myHook.status, theirHook.status]).toEqual([201, 201]);
    await api("POST", "/api/v1/locations", { name: "Mine", external_key: "EV-ISO-MINE" });
    await api("POST", "/api/v1/locations", { name: "Theirs", external_key: "EV-ISO-THEIRS" }, other.auth);
    // A marker after both: once each receiver has its own marker, anything misrouted would have arrived before it.
    await api("POST", "/api/v1/locations", { name: "Mine, last", external_key: "EV-ISO-MINE-LAST" });
    await api("POST", "/api/v1/locations", { name: "Theirs, last", external_key: "EV-ISO-THEIRS-LAST" }, other.auth);
    const keys = (r: typeof mine) => r.events().map((e) => e.data.external_key);
    await eventually(async () => (keys(mine).includes("EV-ISO-MINE-LAST") && keys(theirs).includes("EV-ISO-THEIRS-LAST") ? true : undefined), 20_000, 50);
    expect(keys(mine)).toEqual(["EV-ISO-MINE", "EV-ISO-MINE-LAST"]);
    expect(keys(theirs)).toEqual(["EV-ISO-THEIRS", "EV-ISO-THEIRS-LAST"]);
    expect(mine.events().every((e) => (e as { org_id?: number }).org_id === t.orgId)).toBe(true);
    expect(theirs.events().every((e) => (e as { org_id?: number }).org_id === other.orgId)).toBe(true);
    // Each organization's delivery log holds its own attempts only; the other's webhook is not found.
    const log = await eventually(async () => {
      const res = await api("GET", `/api/v1/webhooks/${theirHook.body!.data.id}/deliveries`, undefined, other.auth);
      return res.body!.total_count === 2 ? res.body! : undefined;
    });
    expect(log.data.map((d: { event_type: string }) => d.event_type)).toEqual(["location.created", "location.created"]);
    expect((await api("GET", `/api/v1/webhooks/${theirHook.body!.data.id}/deliveries`)).status).toBe(404);
    expect((await api("GET", `/api/v1/webhooks/${myHook.body!.data.id}/deliveries`, undefined, other.auth)).status).toBe(404);
    await api("DELETE", `/api/v1/webhooks/${myHook.body!.data.id}`);
    await api("DELETE", `/api/v1/webhooks/${theirHook.body!.data.id}`, undefined, other.auth);
  });

  it("does not follow redirects: a 3xx is a failed attempt, retried later", async () => {
    const elsewhere = await receiver();
    const redirecting = await receiver(() => 302, { location: elsewhere.url });
    const created = await api("POST", "/api/v1/webhooks", { url: redirecting.url, types: ["location.created"] });
    await api("POST", "/api/v1/locations", { name: "Redirect", external_key: "EV-REDIRECT" });
    const attempt = await eventually(async () => (await api("GET", `/api/v1/webhooks/${created.body!.data.id}/deliveries`)).body!.data[0], 20_000, 100);
    expect(attempt).toMatchObject({ attempt: 1, status_code: 302, state: "pending", error: "redirects are not followed" });
    expect(elsewhere.got).toHaveLength(0);
    await api("DELETE", `/api/v1/webhooks/${created.body!.data.id}`);
  });

  it("replays a window of events to a webhook, in order", async () => {
    const hook = await receiver();
    const from = new Date().toISOString();
    for (let i = 0; i < 3; i++) await api("POST", "/api/v1/assets", { name: `Replay ${i}`, external_key: `EV-REPLAY-${i}` });
    // In the feed before the webhook exists: only the replay sends them.
    await eventually(async () => ((await readAll(undefined, "&type=asset.created")).events.filter((e) => String(e.data.external_key).startsWith("EV-REPLAY-")).length === 3 ? true : undefined));
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.created"] });
    const id = created.body!.data.id;
    const replay = await stack.gateway.inject({ method: "POST", url: `/api/v1/webhooks/${id}/replay?from=${encodeURIComponent(from)}`, headers: t.auth });
    expect(replay.statusCode, replay.body).toBe(202);
    expect(replay.json().data).toMatchObject({ webhook_id: id, from, to: null, events: 3 });
    await eventually(async () => (hook.got.length >= 3 ? true : undefined), 20_000, 50);
    expect(hook.events().map((e) => e.data.external_key)).toEqual(["EV-REPLAY-0", "EV-REPLAY-1", "EV-REPLAY-2"]);
    // Attempts are recorded after the receiver answers.
    const attempts = await eventually(async () => {
      const n = (await api("GET", `/api/v1/webhooks/${id}/deliveries`)).body!.total_count as number;
      return n >= 3 ? n : undefined;
    });
    expect(attempts).toBe(3);
    const missingFrom = await api("POST", `/api/v1/webhooks/${id}/replay`, {});
    expect(missingFrom.status).toBe(400);
    expect(missingFrom.body!.error.fields[0]).toMatchObject({ field: "from", code: "required" });
  });
});
