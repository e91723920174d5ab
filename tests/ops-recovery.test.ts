/**
 * Outages and recovery, with the services as real processes: when NATS or
 * Postgres goes away each one reports not-ready on its ops /readyz (503, the
 * failing dependency named) while staying alive, and becomes ready again by
 * itself when the dependency returns; then a write through the gateway and
 * the report that reads it work end to end again. NATS is the test's private
 * nats-server (stopped and restarted with its store); Postgres is reached
 * through a TCP proxy the test cuts and restores.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats, createLogger, ensureStreams, type NatsConnection } from "@whereabouts/shared";
import { createTestDatabase, eventually, freePort, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll } from "../scripts/migrate.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";
import { createIdentityClient, createIdentityStore, type IdentityClient } from "../services/gateway/src/identity/identity-store.ts";
import { createEventPublisher, type EventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { probe, spawnService, startPostgresProxy, waitForReadiness, type ServiceProcess, type TcpProxy } from "./ops-support.ts";

const logger = createLogger("test", "silent");
let db: TestDatabase;
let nats: TestNats;
let nc: NatsConnection;
let proxy: TcpProxy;
let identityDb: IdentityClient;
let auth: Record<string, string>;
let api: string;
/** Stands in for tracking: publishes the scans' position events. */
let tracking: EventPublisher;
let procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase("ops_recovery");
  nats = await startTestNats();
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  nc = await connectNats({ url: nats.url, name: "test", logger });
  await ensureStreams(nc);
  identityDb = createIdentityClient(db.url);
  const store = createIdentityStore(identityDb);
  const org = (await runAdminCommand(["org", "create", "--name", "Recovery"], store)) as { id: number };
  const { key } = (await runAdminCommand(["key", "create", "--org", String(org.id), "--scopes", "all"], store)) as { key: string };
  auth = { authorization: `Bearer ${key}` };
  tracking = createEventPublisher(nc, org.id);

  proxy = await startPostgresProxy();
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  const env = { DATABASE_URL: proxy.rewrite(db.url), NATS_URL: nats.url, RPC_TIMEOUT_MS: "3000", REPORT_CATCHUP_TIMEOUT_MS: "3000" };
  procs = [
    await spawnService("gateway", { ...env, PORT: String(port), HOST: "127.0.0.1" }),
    await spawnService("catalog", env),
    await spawnService("reporting", env),
  ];
  await Promise.all(procs.map((p) => waitForReadiness(p, 200)));
}, 120_000);

afterAll(async () => {
  for (const p of procs) p.kill();
  await nc?.close();
  await identityDb?.$disconnect();
  await proxy?.close();
  await nats?.destroy();
  await db?.drop();
});

const notReady = (checks: Record<string, boolean>) => ({ status: "not_ready", checks });
const ready = { status: "ready", checks: { nats: true, database: true } };

async function expectAll(status: 200 | 503, body: unknown) {
  for (const p of procs) expect(await waitForReadiness(p, status, 20_000), p.name).toEqual(body);
}

/**
 * A write through the gateway (catalog), its scan (a position event on
 * TRACKING), then the report through the gateway, which must show the asset:
 * catalog, both of reporting's consumers and the RPC paths all work.
 */
async function writeAndReport(name: string) {
  const created = await eventually(async () => {
    const res = await fetch(`${api}/api/v1/assets`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name }),
    });
    return res.status === 201 ? ((await res.json()) as { data: { id: number } }) : undefined;
  }, 20_000, 250);
  const assetId = created.data.id;
  // Right after an outage the test's own connection may still be reconnecting:
  // publish until JetStream acknowledges (the same event again is harmless).
  const observedAt = new Date().toISOString();
  await eventually(
    () => tracking.position({ assetId, locationId: 1, observedAt, seq: assetId }).then(() => true, () => undefined),
    20_000,
    250,
  );
  await eventually(async () => {
    const res = await fetch(`${api}/api/v1/reports/asset-locations?asset_id=${assetId}`, { headers: auth });
    if (res.status !== 200) return undefined;
    const { data } = (await res.json()) as { data: Array<{ asset_id: number }> };
    return data.some((row) => row.asset_id === assetId) ? true : undefined;
  }, 20_000, 250);
}

describe("outages", () => {
  it("all three are ready, and serve a write and its report", async () => {
    await expectAll(200, ready);
    await writeAndReport("before any outage");
  });

  it("NATS down: not ready (nats), alive; NATS back: ready again, and the flow works", async () => {
    await nats.stop();
    await expectAll(503, notReady({ nats: false, database: true }));
    for (const p of procs) expect((await probe(`${p.opsUrl}/healthz`))?.status, p.name).toBe(200);

    await nats.start();
    await expectAll(200, ready);
    await writeAndReport("after the NATS outage");
  });

  it("Postgres down: not ready (database), alive; Postgres back: ready again, and the flow works", async () => {
    await proxy.cut();
    await expectAll(503, notReady({ nats: true, database: false }));
    for (const p of procs) expect((await probe(`${p.opsUrl}/healthz`))?.status, p.name).toBe(200);

    await proxy.restore();
    await expectAll(200, ready);
    await writeAndReport("after the Postgres outage");
    for (const p of procs) {
      expect(p.child.exitCode, p.output().slice(-3000)).toBeNull();
      // No consumer gave up on the way (a dead worker would leave the service "ready" but idle).
      expect(p.logs().filter((l) => l.msg === "consumer stopped"), p.name).toEqual([]);
    }
  });
});
