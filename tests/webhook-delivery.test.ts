/**
 * Webhook delivery across reporting replicas: per-asset order with two
 * replicas sharing the work (and retries in the way), and a replica killed
 * mid-delivery (SIGKILL of a real process): nothing is lost, and what the
 * receiver got twice is counted; one killed after its deliveries were
 * acknowledged and recorded: none of them is sent again.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats, createLogger, type RunningService } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { startReporting } from "../services/reporting/src/app.ts";
import { startStack, type Stack } from "./harness.ts";
import { spawnService, waitForReadiness, type ServiceProcess } from "./ops-support.ts";

const TIMEOUT_MS = 2000;
let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;
const cleanup: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  stack = await startStack({ label: "webhook_delivery", events: { allowPrivateTargets: true, timeoutMs: TIMEOUT_MS } });
  t = await stack.tenant("Delivery Org");
}, 120_000);
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await stack?.close();
});

interface Hit {
  at: number;
  eventId: string;
  status: number | null;
  event: { id: string; type: string; data: { id: number; name: string } };
}

async function receiver(answer: (hit: Hit, n: number) => number | null) {
  const hits: Hit[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      const event = JSON.parse(body) as Hit["event"];
      const hit: Hit = { at: Date.now(), eventId: event.id, status: null, event };
      hits.push(hit);
      hit.status = answer(hit, hits.length);
      if (hit.status === null) held.push(res);
      else res.writeHead(hit.status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup.push(async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, hits, held };
}

const api = async (method: string, url: string, body?: unknown) => {
  const res = await stack.gateway.inject({
    method: method as "GET",
    url,
    headers: { ...t.auth, ...(body === undefined ? {} : { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, json: () => res.json() as { data: Record<string, unknown> } & Record<string, unknown> };
};

describe("webhook delivery", () => {
  it("keeps each asset's events in order with two replicas sending, retries included", { timeout: 120_000 }, async () => {
    const logger = createLogger("test", "silent");
    const nc = await connectNats({ url: stack.nats.url, name: "reporting-2", logger });
    const second: RunningService = await startReporting({ nc, logger, databaseUrl: stack.db.url, events: { allowPrivateTargets: true, timeoutMs: TIMEOUT_MS } });
    cleanup.push(async () => {
      await second.stop();
      if (!nc.isClosed()) await nc.close();
    });
    // Every third request fails: retries (1 s, 2 s...) stand in the way of the next events.
    const hook = await receiver((_, n) => (n % 3 === 0 ? 503 : 200));
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["asset.created", "asset.updated"] });
    expect(created.status).toBe(201);

    const assets: number[] = [];
    for (let i = 0; i < 4; i++) assets.push((await api("POST", "/api/v1/assets", { name: `v0` })).json().data.id as number);
    for (let v = 1; v <= 6; v++) {
      await Promise.all(assets.map((id) => api("PATCH", `/api/v1/assets/${id}`, { name: `v${v}` })));
    }
    const delivered = () => hook.hits.filter((h) => h.status === 200);
    await eventually(async () => (new Set(delivered().map((h) => h.eventId)).size === assets.length * 7 ? true : undefined), 90_000, 200);
    for (const id of assets) {
      // An answer that came back after the sender's timeout is retried, so a version
      // may arrive twice in a row; never one after a later version.
      const versions = delivered()
        .filter((h) => h.event.data.id === id)
        .map((h) => Number(h.event.data.name.slice(1)));
      expect(versions.every((v, i) => i === 0 || v >= versions[i - 1]!), `asset ${id}: ${versions.join(",")}`).toBe(true);
      expect([...new Set(versions)], `asset ${id}`).toEqual([0, 1, 2, 3, 4, 5, 6]);
    }
    // None was sent twice while in flight: the receiver got each event at most as
    // often as the delivery log shows attempts (one row per attempt, both replicas).
    // Counted once every event's delivery is finished in the log: an answer the sender
    // timed out on reaches the receiver before its retry does, and the retry's row
    // follows its answer.
    const webhookLog = `/api/v1/webhooks/${created.json().data.id}/deliveries`;
    await eventually(async () => {
      const finished = (await api("GET", `${webhookLog}?state=delivered&limit=200`)).json().data as unknown as Array<{ event_id: string }>;
      return new Set(finished.map((d) => d.event_id)).size === assets.length * 7 ? true : undefined;
    }, 90_000, 200);
    const attempts = new Map<string, number>();
    for (let page = 0; page < 20; page++) {
      const log = await api("GET", `${webhookLog}?limit=200&offset=${page * 200}`);
      const rows = log.json().data as unknown as Array<{ event_id: string }>;
      for (const r of rows) attempts.set(r.event_id, (attempts.get(r.event_id) ?? 0) + 1);
      if (rows.length < 200) break;
    }
    const received = new Map<string, number>();
    for (const h of hook.hits) received.set(h.eventId, (received.get(h.eventId) ?? 0) + 1);
    for (const [eventId, n] of received) expect(n, eventId).toBeLessThanOrEqual(attempts.get(eventId) ?? 0);
    await api("DELETE", `/api/v1/webhooks/${created.json().data.id}`);
  });

  it("a replica killed mid-delivery loses nothing; what the receiver got twice is counted", { timeout: 120_000 }, async () => {
    await stack.stopService("reporting");
    let killed = false;
    // Until the kill, requests are held open (in flight at the replica).
    const hook = await receiver(() => (killed ? 200 : null));
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["location.created"] });
    expect(created.status).toBe(201);
    const replica: ServiceProcess = await spawnService("reporting", {
      DATABASE_URL: stack.db.url,
      NATS_URL: stack.nats.url,
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_TIMEOUT_MS: "20000",
    });
    cleanup.push(() => replica.kill());
    await waitForReadiness(replica, 200, 60_000);
    const keys = Array.from({ length: 8 }, (_, i) => `KILL-${i}`);
    for (const key of keys) expect((await api("POST", "/api/v1/locations", { name: key, external_key: key })).status).toBe(201);
    // One location's events at a time per key, but these are eight keys: several are in flight at once.
    await eventually(async () => (hook.hits.length >= 3 ? true : undefined), 30_000, 50);
    replica.child.kill("SIGKILL");
    await replica.exit;
    killed = true;
    const inFlightAtKill = hook.hits.length;

    await stack.startService("reporting");
    // The dead replica's leases expire (20 s timeout + 5 s): then they go out again.
    await eventually(
      async () => {
        const ok = new Set(hook.hits.filter((h) => h.status === 200).map((h) => h.event.data.name));
        return keys.every((k) => ok.has(k)) ? true : undefined;
      },
      90_000,
      200,
    );
    const seen = new Map<string, number>();
    for (const h of hook.hits) seen.set(h.eventId, (seen.get(h.eventId) ?? 0) + 1);
    const duplicates = [...seen.values()].filter((n) => n > 1).length;
    expect(seen.size).toBe(keys.length);
    expect(duplicates).toBeGreaterThanOrEqual(1);
    expect(duplicates).toBeLessThanOrEqual(inFlightAtKill);
    // The log counts them too: a taken-over delivery's attempt is its second. The receiver has
    // each body before the sender records the outcome: read the log once every key's is there.
    const rows = await eventually(async () => {
      const log = await api("GET", `/api/v1/webhooks/${created.json().data.id}/deliveries?state=delivered&limit=200`);
      const delivered = log.json().data as unknown as Array<{ event_id: string; attempt: number }>;
      return delivered.length >= keys.length ? delivered : undefined;
    });
    expect(rows).toHaveLength(keys.length);
    const attemptOf = new Map(rows.map((d) => [d.event_id, d.attempt]));
    // Every event the receiver got twice was taken over: its delivered attempt is the second.
    for (const [eventId, n] of seen) if (n > 1) expect(attemptOf.get(eventId), eventId).toBe(2);
    // A lease the dead replica took whose request never reached the receiver is
    // taken over too (a second attempt, received once): at least the duplicates.
    const takenOver = rows.filter((d) => d.attempt === 2).length;
    expect(takenOver).toBeGreaterThanOrEqual(duplicates);
    expect(rows.every((d) => d.attempt <= 2)).toBe(true);
  });

  it("a replica killed after its deliveries were acknowledged and recorded sends none of them again", { timeout: 120_000 }, async () => {
    await stack.stopService("reporting");
    const hook = await receiver(() => 200);
    const created = await api("POST", "/api/v1/webhooks", { url: hook.url, types: ["location.created"] });
    expect(created.status).toBe(201);
    const webhookId = created.json().data.id;
    const replica: ServiceProcess = await spawnService("reporting", {
      DATABASE_URL: stack.db.url,
      NATS_URL: stack.nats.url,
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    });
    cleanup.push(() => replica.kill());
    await waitForReadiness(replica, 200, 60_000);
    const keys = Array.from({ length: 6 }, (_, i) => `ACKED-${i}`);
    for (const key of keys) expect((await api("POST", "/api/v1/locations", { name: key, external_key: key })).status).toBe(201);
    const delivered = async () =>
      (await api("GET", `/api/v1/webhooks/${webhookId}/deliveries?state=delivered&limit=200`)).json().data as unknown as Array<{ event_id: string; attempt: number }>;
    // Acknowledged with 2xx and recorded as delivered: then the replica dies.
    await eventually(async () => ((await delivered()).length === keys.length ? true : undefined), 30_000, 50);
    replica.child.kill("SIGKILL");
    await replica.exit;

    await stack.startService("reporting");
    // Past the dead replica's leases (timeout + 5 s), if it had held any: what comes now is new work only.
    const after = Date.now() + TIMEOUT_MS + 6000;
    expect((await api("POST", "/api/v1/locations", { name: "ACKED-after", external_key: "ACKED-after" })).status).toBe(201);
    await eventually(async () => (Date.now() > after && hook.hits.some((h) => h.event.data.name === "ACKED-after") ? true : undefined), 60_000, 200);
    const seen = new Map<string, number>();
    for (const h of hook.hits) seen.set(h.event.data.name, (seen.get(h.event.data.name) ?? 0) + 1);
    expect(Object.fromEntries(seen)).toEqual(Object.fromEntries([...keys, "ACKED-after"].map((k) => [k, 1])));
    const log = await eventually(async () => {
      const rows = await delivered();
      return rows.length === keys.length + 1 ? rows : undefined;
    });
    expect(log.every((d) => d.attempt === 1)).toBe(true);
  });
});
