/**
 * The webhook dispatcher on its own (EXTENSIONS.md section 4), against a real
 * database and real HTTP receivers on loopback: the retry schedule and its
 * cap, giving up 24 h after the event (`failed`), a deleted webhook, the
 * SSRF guard on the address dialled, a hanging receiver that shares its
 * origin with another webhook (several webhooks may point at one host)
 * without delaying it, and a backlog in front of the due order.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createPool, WEBHOOK_RETRY_WINDOW_MS, type Pool } from "@whereabouts/shared";
import { eventually, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { RETRY_DELAY_CAP_MS, retryDelayMs, startWebhookDispatcher } from "./dispatcher.ts";
import { createTargetGuard, type TargetGuard } from "./target-guard.ts";

let db: TestDatabase;
let pool: Pool;
const cleanup: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  db = await createMigratedDatabase("webhook_dispatcher");
  pool = createPool(db.url, 4);
}, 120_000);
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await pool?.end();
  await db?.drop();
});

interface Hit {
  path: string;
  eventId: string;
  answer(status: number): void;
}

/** One server for several webhooks (paths): `answer` gives the status, or null to hold the request. */
async function receiver(answer: (path: string) => number | null) {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const hit: Hit = { path: req.url ?? "", eventId: String(req.headers["whereabouts-event-id"]), answer: (status) => res.writeHead(status).end() };
      hits.push(hit);
      const status = answer(hit.path);
      if (status !== null) hit.answer(status);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

/** Runs `body` with a dispatcher working, stopped afterwards (so the next test's is the only one). */
async function withDispatcher(
  options: { perTarget?: number; timeoutMs?: number; concurrency?: number; pollMs?: number; guard?: TargetGuard },
  body: () => Promise<void>,
): Promise<void> {
  const d = startWebhookDispatcher({
    pool,
    guard: createTargetGuard(true),
    logger: createLogger("test", "silent"),
    pollMs: 50,
    ...options,
  });
  try {
    await body();
  } finally {
    await d.stop();
  }
}

async function webhook(url: string): Promise<number> {
  const { rows } = await pool.query<{ id: number }>(
    `INSERT INTO reporting.webhooks (org_id, url, types, secret) VALUES (1, $1, '{asset.moved}', 'whsec_test') RETURNING id`,
    [url],
  );
  return rows[0]!.id;
}

let events = 0;
/** An event and its delivery to `webhookId`, queued `ageMs` after the event was recorded. */
async function queue(webhookId: number, ageMs = 0): Promise<string> {
  const n = ++events;
  const { rows } = await pool.query<{ id: string; seq: string }>(
    `INSERT INTO reporting.partner_events (id, org_id, type, occurred_at, occurred, ordering_key, source_id, data)
     VALUES ($1, 1, 'asset.moved', now()::text, now(), $2, $1, json_build_object('asset_id', $3::int)) RETURNING id, seq`,
    [`ev-${n}`, `asset:${n}`, n],
  );
  await pool.query(
    `INSERT INTO reporting.webhook_deliveries (webhook_id, org_id, event_seq, ordering_key, created_at)
     VALUES ($1, 1, $2, $3, now() - make_interval(secs => $4::float8 / 1000))`,
    [webhookId, rows[0]!.seq, `asset:${n}`, ageMs],
  );
  return rows[0]!.id;
}

interface AttemptRow {
  event_id: string;
  attempt: number;
  status_code: number | null;
  state: string;
  error: string | null;
  next_attempt_at: Date | null;
}
async function attempts(webhookId: number): Promise<AttemptRow[]> {
  const { rows } = await pool.query<AttemptRow>(
    `SELECT event_id, attempt, status_code, state, error, next_attempt_at FROM reporting.webhook_attempts WHERE webhook_id = $1 ORDER BY id`,
    [webhookId],
  );
  return rows;
}

describe("the webhook dispatcher", () => {
  it("retries 1 s doubling with up to 25 % jitter, never earlier, and never more than 1 h apart", () => {
    expect(retryDelayMs(1, 0)).toBe(1000);
    expect(retryDelayMs(1, 0.999)).toBeLessThanOrEqual(1250);
    expect(retryDelayMs(2, 0)).toBe(2000);
    expect(retryDelayMs(5, 0.5)).toBe(Math.round(16_000 * 1.125));
    // 2^12 s is past the hour: capped, jitter included.
    expect(retryDelayMs(13, 0)).toBe(RETRY_DELAY_CAP_MS);
    expect(retryDelayMs(13, 0.999)).toBe(RETRY_DELAY_CAP_MS);
    expect(retryDelayMs(40, 0.5)).toBe(RETRY_DELAY_CAP_MS);
    expect(retryDelayMs(12, 0.999)).toBeLessThan(RETRY_DELAY_CAP_MS);
    expect(RETRY_DELAY_CAP_MS).toBe(3600_000);
  });

  it("gives up 24 h after the event: the failing attempt is `failed`, a younger one stays `pending`", async () => {
    const hook = await receiver(() => 500);
    const old = await webhook(`${hook.base}/old`);
    const young = await webhook(`${hook.base}/young`);
    const oldEvent = await queue(old, WEBHOOK_RETRY_WINDOW_MS - 500);
    const youngEvent = await queue(young, 60_000);
    let oldLog: AttemptRow[] = [];
    let youngLog: AttemptRow[] = [];
    await withDispatcher({}, async () => {
      const logs = await eventually(async () => {
        const both = [await attempts(old), await attempts(young)] as const;
        return both.every((l) => l.length >= 1) ? both : undefined;
      });
      [oldLog, youngLog] = logs;
    });
    expect(oldLog).toEqual([{ event_id: oldEvent, attempt: 1, status_code: 500, state: "failed", error: null, next_attempt_at: null }]);
    expect(youngLog[0]).toMatchObject({ event_id: youngEvent, attempt: 1, status_code: 500, state: "pending" });
    expect(youngLog[0]!.next_attempt_at).not.toBeNull();
    // The failed delivery is finished (its attempt rows are its record); the young one waits for its retry.
    const { rows } = await pool.query<{ webhook_id: number }>(`SELECT webhook_id FROM reporting.webhook_deliveries WHERE webhook_id IN ($1, $2)`, [old, young]);
    expect(rows.map((r) => r.webhook_id)).toEqual([young]);
    expect(hook.hits.filter((h) => h.path === "/old")).toHaveLength(1);
    await pool.query(`DELETE FROM reporting.webhook_deliveries WHERE webhook_id = $1`, [young]);
  });

  it("a deleted webhook's queued deliveries are `failed` without a request", async () => {
    const hook = await receiver(() => 204);
    const id = await webhook(`${hook.base}/gone`);
    const event = await queue(id);
    await pool.query(`UPDATE reporting.webhooks SET deleted_at = now() WHERE id = $1`, [id]);
    let log: AttemptRow[] = [];
    await withDispatcher({}, async () => {
      log = await eventually(async () => {
        const rows = await attempts(id);
        return rows.length ? rows : undefined;
      });
    });
    expect(log).toEqual([{ event_id: event, attempt: 1, status_code: null, state: "failed", error: "the webhook was deleted", next_attempt_at: null }]);
    expect(hook.hits).toHaveLength(0);
  });

  it("a hanging receiver holds only its own webhook's slots, even on an origin another webhook shares", async () => {
    const perTarget = 2;
    let holding = true;
    const hook = await receiver((path) => (path === "/hung" && holding ? null : 204));
    const hung = await webhook(`${hook.base}/hung`);
    const fine = await webhook(`${hook.base}/fine`);
    for (let i = 0; i < 5; i++) await queue(hung);
    const fineEvents: string[] = [];
    for (let i = 0; i < 5; i++) fineEvents.push(await queue(fine));
    await withDispatcher({ perTarget, timeoutMs: 20_000 }, async () => {
      await eventually(async () => (hook.hits.filter((h) => h.path === "/fine").length >= 5 ? true : undefined), 10_000, 20);
      const held = hook.hits.filter((h) => h.path === "/hung");
      // The other webhook got everything while this one's requests were all unanswered, at most perTarget of them.
      expect(hook.hits.filter((h) => h.path === "/fine").map((h) => h.eventId).sort()).toEqual([...fineEvents].sort());
      expect(held.length).toBeGreaterThanOrEqual(1);
      expect(held.length).toBeLessThanOrEqual(perTarget);
      expect(await attempts(hung)).toEqual([]);
      // Released: the held requests are answered and the rest go out.
      holding = false;
      for (const h of held) h.answer(204);
      await eventually(async () => ((await attempts(hung)).filter((a) => a.state === "delivered").length === 5 ? true : undefined), 10_000, 20);
    });
  });

  it("checks the address it dials: a name that resolves to loopback is refused when it connects", async () => {
    const hook = await receiver(() => 204);
    const id = await webhook(`http://localhost:${new URL(hook.base).port}/named`);
    const event = await queue(id);
    // The save-time check of the name is left out, so only the connection's lookup can refuse it.
    const guard: TargetGuard = { ...createTargetGuard(false), checkLiteral: () => undefined };
    let log: AttemptRow[] = [];
    await withDispatcher({ guard }, async () => {
      log = await eventually(async () => {
        const rows = await attempts(id);
        return rows.length ? rows : undefined;
      });
    });
    expect(log[0]).toMatchObject({ event_id: event, attempt: 1, status_code: null, state: "pending" });
    expect(log[0]!.error).toMatch(/127\.0\.0\.1 is a private, loopback, link-local or reserved address|::1 is a private/);
    expect(hook.hits).toHaveLength(0);
    await pool.query(`DELETE FROM reporting.webhook_deliveries WHERE webhook_id = $1`, [id]);
  });

  it("a webhook whose backlog fills the front of the due order does not keep the others waiting for the next poll", async () => {
    let holding = true;
    const hook = await receiver((path) => (path === "/backlog" && holding ? null : 204));
    const backlog = await webhook(`${hook.base}/backlog`);
    const other = await webhook(`${hook.base}/other`);
    for (let i = 0; i < 20; i++) await queue(backlog);
    const otherEvents = [await queue(other), await queue(other)];
    // The first claim may scan 4 rows, all the backlog's, and take 2 of them (its slots):
    // the next claim must follow at once, not after a poll a minute away.
    await withDispatcher({ perTarget: 2, concurrency: 4, pollMs: 60_000, timeoutMs: 20_000 }, async () => {
      await eventually(async () => ((await attempts(other)).length === 2 ? true : undefined), 10_000, 20);
      expect(hook.hits.filter((h) => h.path === "/other").map((h) => h.eventId).sort()).toEqual([...otherEvents].sort());
      expect(hook.hits.filter((h) => h.path === "/backlog")).toHaveLength(2);
      holding = false;
      for (const h of hook.hits.filter((x) => x.path === "/backlog")) h.answer(204);
      await eventually(async () => ((await attempts(backlog)).length === 20 ? true : undefined), 10_000, 20);
    });
  });
});
