/**
 * SIGTERM, as Kubernetes sends it: each process (run as the image runs it)
 * stops taking work, reports not-ready on its ops port, finishes the requests
 * and batches in flight, drains NATS and exits 0 well within the grace period.
 * A slow request is made slow for real: a row lock held by the test, or a
 * backend that takes its time.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  callRpc,
  connectNats,
  createLogger,
  DURABLES,
  respondRpc,
  ensureStreams,
  STREAMS,
  type NatsConnection,
  type RpcRequest,
} from "@whereabouts/shared";
import { createTestDatabase, eventually, freePort, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll } from "../scripts/migrate.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";
import { createIdentityClient, createIdentityStore, type IdentityClient } from "../services/gateway/src/identity/identity-store.ts";
import { createEventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { exitWithin, probe, spawnService, waitForReadiness, type ServiceProcess } from "./ops-support.ts";

const logger = createLogger("test", "silent");
let db: TestDatabase;
let nats: TestNats;
let nc: NatsConnection;
let identityDb: IdentityClient;
let orgId: number;
let apiKey: string;
const procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase("ops_shutdown");
  nats = await startTestNats();
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  nc = await connectNats({ url: nats.url, name: "test", logger });
  await ensureStreams(nc);
  identityDb = createIdentityClient(db.url);
  const store = createIdentityStore(identityDb);
  orgId = ((await runAdminCommand(["org", "create", "--name", "Shutdown"], store)) as { id: number }).id;
  apiKey = ((await runAdminCommand(["key", "create", "--org", String(orgId), "--scopes", "all"], store)) as { key: string }).key;
});
afterEach(() => {
  for (const p of procs.splice(0)) p.kill();
});
afterAll(async () => {
  await nc?.close();
  await identityDb?.$disconnect();
  await nats?.destroy();
  await db?.drop();
});

const envelope = (overrides: Partial<RpcRequest>): RpcRequest => ({
  request_id: `shutdown-${Math.random().toString(36).slice(2)}`,
  principal: { key_id: 1, org_id: orgId, scopes: [] },
  method: "GET",
  route: "/",
  path: "/",
  params: {},
  query: {},
  ...overrides,
});

async function start(name: ServiceProcess["name"], env: Record<string, string> = {}) {
  const proc = await spawnService(name, { DATABASE_URL: db.url, NATS_URL: nats.url, ...env });
  procs.push(proc);
  await waitForReadiness(proc, 200);
  return proc;
}

/** A transaction holding `table` exclusively until released: every statement on it waits. */
async function lockTable(table: string) {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query("BEGIN");
  await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  const pid = ((await client.query("SELECT pg_backend_pid() AS pid")).rows[0] as { pid: number }).pid;
  return {
    /** Waits until `n` other sessions are blocked behind the lock. */
    waiters: (n: number) =>
      eventually(async () => {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
          [pid],
        );
        return rows[0]!.n >= n ? true : undefined;
      }, 15_000),
    release: async () => {
      await client.query("ROLLBACK");
      await client.end();
    },
  };
}

/** SIGTERM while work is in flight: still running and not ready until `release`, then exit 0. */
async function terminateDuringWork(proc: ServiceProcess, release: () => Promise<void>) {
  proc.child.kill("SIGTERM");
  // Not ready as soon as the signal is handled, and still running: the work holds it.
  const notReady = { status: 503, body: { status: "not_ready", checks: { stopping: false } } };
  await eventually(async () => (JSON.stringify(await probe(`${proc.opsUrl}/readyz`)) === JSON.stringify(notReady) ? true : undefined), 10_000, 20);
  expect(proc.child.exitCode, proc.output()).toBeNull();
  expect((await probe(`${proc.opsUrl}/healthz`))?.status).toBe(200);
  const released = Date.now();
  await release();
  const exit = await exitWithin(proc, 10_000);
  expect(exit, proc.output()).toEqual({ code: 0, signal: null });
  expect(Date.now() - released).toBeLessThan(10_000);
  expect(proc.logs().some((l) => l.msg === "shutting down")).toBe(true);
  // The ops server went last.
  expect(await probe(`${proc.opsUrl}/healthz`)).toBeUndefined();
}

// Child processes under a loaded 2-core CI machine: one retry absorbs a slow start, a real failure still fails twice.
describe("SIGTERM", { retry: 1 }, () => {
  it("gateway: finishes the request in flight (a slow backend), then exits 0", async () => {
    const seen: Array<string | undefined> = [];
    let received!: () => void;
    const arrived = new Promise<void>((r) => (received = r));
    let release!: () => void;
    const answer = new Promise<void>((r) => (release = r));
    const backend = nc.subscribe("catalog.>", {
      queue: "catalog",
      callback: (_err, msg) => {
        if (msg.subject === "catalog.ping") {
          respondRpc(msg, { status: 200, headers: {}, body: { ok: true } }, "ping");
          return;
        }
        seen.push(msg.headers?.get("traceparent"));
        received();
        void answer.then(() => respondRpc(msg, { status: 200, headers: {}, body: { data: ["slow"] } }, "slow"));
      },
    });
    try {
      const port = await freePort();
      const gateway = await start("gateway", { PORT: String(port), HOST: "127.0.0.1" });
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const response = fetch(`http://127.0.0.1:${port}/api/v1/assets`, { headers: { authorization: `Bearer ${apiKey}`, traceparent } });
      await arrived;

      gateway.child.kill("SIGTERM");
      const notReady = { status: 503, body: { status: "not_ready", checks: { stopping: false } } };
      await eventually(async () => (JSON.stringify(await probe(`${gateway.opsUrl}/readyz`)) === JSON.stringify(notReady) ? true : undefined), 10_000, 20);
      expect(gateway.child.exitCode, gateway.output()).toBeNull();
      release();
      const res = await response;
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ data: ["slow"] });
      expect(await exitWithin(gateway, 10_000), gateway.output()).toEqual({ code: 0, signal: null });
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
      // The request was traced through: same trace id, the gateway's own span.
      expect(seen[0]).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
      expect(seen[0]).not.toBe(traceparent);
    } finally {
      backend.unsubscribe();
    }
  });

  it("catalog: answers the write in flight (blocked on a lock), publishes its event, exits 0", async () => {
    const catalog = await start("catalog");
    const lock = await lockTable("catalog.assets");
    const reply = callRpc(
      nc,
      "catalog.asset.create",
      envelope({ method: "POST", route: "/api/v1/assets", path: "/api/v1/assets", body: { name: "in flight" } }),
      { timeoutMs: 20_000 },
    );
    await lock.waiters(1);
    await terminateDuringWork(catalog, lock.release);
    const answered = await reply;
    expect(answered.status, JSON.stringify(answered.body)).toBe(201);
    const id = (answered.body as { data: { id: number } }).data.id;
    // Published before the reply, so it is in the stream.
    const jsm = await jetstreamManager(nc);
    const last = await jsm.streams.getMessage(STREAMS.CATALOG.name, { last_by_subj: `catalog.events.${orgId}.asset.created` });
    expect(last?.json<{ entity_id: number }>().entity_id).toBe(id);
  });

  it("reporting: finishes the report and the batch in flight, acks the batch, exits 0", async () => {
    const reporting = await start("reporting");
    // Earlier tests left catalog events behind: let reporting apply them first,
    // or its catch-up batch (not the report) would be the first lock waiter.
    const jsm0 = await jetstreamManager(nc);
    await eventually(async () => {
      const info = await jsm0.consumers.info(STREAMS.CATALOG.name, DURABLES.reportingCatalog);
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    }, 30_000);
    const lock = await lockTable("reporting.assets");
    const report = callRpc(
      nc,
      "reporting.report.asset_locations",
      envelope({ route: "/api/v1/reports/asset-locations", path: "/api/v1/reports/asset-locations" }),
      { timeoutMs: 20_000 },
    );
    await lock.waiters(1);
    // A catalog event whose batch then blocks on the same lock.
    await createEventPublisher(nc, orgId).asset({ id: 4242, key: "ASSET-4242" });
    await lock.waiters(2);

    await terminateDuringWork(reporting, lock.release);
    expect((await report).status).toBe(200);
    // The batch committed and was acked before NATS drained.
    const jsm = await jetstreamManager(nc);
    const info = await jsm.consumers.info(STREAMS.CATALOG.name, DURABLES.reportingCatalog);
    expect({ pending: info.num_pending, unacked: info.num_ack_pending }).toEqual({ pending: 0, unacked: 0 });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT 1 FROM reporting.assets WHERE org_id = $1 AND asset_id = $2", [orgId, 4242]);
      expect(rows).toHaveLength(1);
    } finally {
      await client.end();
    }
  });

  it("with NATS down: still exits 0 promptly (nothing waits for the broker to come back)", async () => {
    const services = [await start("catalog"), await start("reporting")];
    await nats.stop();
    try {
      for (const proc of services) await waitForReadiness(proc, 503);
      for (const proc of services) proc.child.kill("SIGTERM");
      for (const proc of services) expect(await exitWithin(proc, 10_000), proc.output()).toEqual({ code: 0, signal: null });
    } finally {
      await nats.start();
    }
  });
});
