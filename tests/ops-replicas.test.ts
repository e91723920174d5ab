/**
 * Replicas on one machine: two gateways, two catalogs, two trackings and two
 * reportings as separate processes (run as the images run them) against one
 * private nats-server and one fresh database, the gateways sharing rate-limit
 * counts through Redis. Shows that migrations started together apply once,
 * that RPCs spread over the replicas (each process's own /metrics), that
 * every scan is processed exactly once while a tracking replica is SIGKILLed
 * mid-stream, that a key's rate limit holds across gateways, and that a read
 * through one gateway right after a write through the other is never stale.
 *
 * Each step prints a one-line JSON summary (`[ops-replicas] ...`).
 */
import { spawn } from "node:child_process";
import { randomInt, randomUUID } from "node:crypto";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectNats,
  createLogger,
  DURABLES,
  encodeJson,
  ensureStreams,
  migrationsDir,
  repoRoot,
  scanSubject,
  STREAMS,
  type NatsConnection,
} from "@whereabouts/shared";
import { createTestDatabase, eventually, freePort, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll, SCHEMAS } from "../scripts/migrate.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";
import { createIdentityClient, createIdentityStore, type IdentityClient, type IdentityStore } from "../services/gateway/src/identity/identity-store.ts";
import { scrapeMetrics, spawnService, sumMetric, waitForReadiness, type ProcessName, type ServiceProcess } from "./ops-support.ts";

const REDIS_URL = process.env.TEST_REDIS_URL || process.env.REDIS_URL || "redis://127.0.0.1:6379";
const RATE_LIMIT_WINDOW_MS = 60_000;
const SCAN_EVENTS = 2000;
const SCAN_ASSETS = 60;
const RYW_ROUNDS = 50;
/** Short enough that the killed replica's unacked scans come back within the test. */
const TRACKING_ENV = {
  TRACKING_SCAN_BATCH_SIZE: "100",
  TRACKING_SCAN_ACK_WAIT_MS: "5000",
  TRACKING_CATALOG_ACK_WAIT_MS: "2000",
  TRACKING_METRICS_LOG_INTERVAL_MS: "0",
};
/** Read-your-writes waits: generous bounds for a loaded 2-core machine (a 503 is retried, a stale 200 fails). */
const REPORTING_ENV = { REPORT_CATCHUP_TIMEOUT_MS: "10000" };

const logger = createLogger("test", "silent");
let db: TestDatabase;
let nats: TestNats;
let nc: NatsConnection;
let sql: pg.Client;
let identityDb: IdentityClient;
let store: IdentityStore;
let orgId: number;
let auth: Record<string, string>;
const procs: ServiceProcess[] = [];
const replicas: Record<ProcessName, ServiceProcess[]> = { gateway: [], catalog: [], tracking: [], reporting: [] };
const apiUrls: string[] = [];
let migrationRuns: Array<{ runner: string; applied: Record<string, number> }> = [];

const summary = (step: string, figures: Record<string, unknown>) => console.log(`[ops-replicas] ${JSON.stringify({ step, ...figures })}`);

/** `node --import tsx scripts/migrate.ts`, as the migrate image runs it; resolves with what it applied per schema. */
function migrateProcess(url: string): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "scripts", "migrate.ts")], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: url, GATEWAY_DATABASE_URL: "", CATALOG_DATABASE_URL: "", TRACKING_DATABASE_URL: "", REPORTING_DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 45_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`migrate exited ${code}:\n${out}`));
      const applied: Record<string, number> = {};
      for (const m of out.matchAll(/^(\w+): (\d+) applied, (\d+) already applied$/gm)) applied[m[1]!] = Number(m[2]);
      resolve(applied);
    });
  });
}

async function start(name: ProcessName, env: Record<string, string> = {}) {
  const proc = await spawnService(name, { DATABASE_URL: db.url, NATS_URL: nats.url, ...env });
  procs.push(proc);
  replicas[name].push(proc);
  return proc;
}

interface ApiResponse {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON bodies of many shapes
  body: any;
}

/** One request through gateway `g` (0 or 1). */
async function api(g: number, method: string, url: string, body?: unknown, headers: Record<string, string> = auth): Promise<ApiResponse> {
  const res = await fetch(`${apiUrls[g]}${url}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/**
 * A read that must be fresh: 200 (or 404). A 503 (a replica still catching up past its bound, on a
 * loaded machine) is not stale, so it is repeated a few times, and counted; a stale 200 fails the
 * caller's assertions.
 */
let unavailableRetries = 0;
async function readFresh(g: number, url: string): Promise<ApiResponse> {
  for (let attempt = 0; ; attempt++) {
    const res = await api(g, "GET", url);
    if (res.status === 503 && attempt < 3) {
      unavailableRetries++;
      continue;
    }
    if (res.status !== 404) expect(res.status, `GET ${url}: ${JSON.stringify(res.body)}`).toBe(200);
    return res;
  }
}

/** Runs `fn` over `items` with at most `concurrency` in flight. */
async function inPool<T, R>(items: T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** mulberry32: the same scan mix on every run. */
function seeded(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

beforeAll(async () => {
  db = await createTestDatabase("ops_replicas");
  nats = await startTestNats();

  // 1. Migrations started together: two migrate processes and three in-process runs. The test holds
  // the migrator's first advisory lock until all five wait on it, so they really contend.
  const gate = new pg.Client({ connectionString: db.url });
  await gate.connect();
  await gate.query("SELECT pg_advisory_lock(hashtext($1))", [`whereabouts:migrate:${SCHEMAS[0].schema}`]);
  const running = Promise.all([
    migrateProcess(db.url).then((applied) => ({ runner: "process-1", applied })),
    migrateProcess(db.url).then((applied) => ({ runner: "process-2", applied })),
    ...[1, 2, 3].map(async (n) => {
      const results = await migrateAll({ DATABASE_URL: db.url }, () => undefined);
      return { runner: `in-process-${n}`, applied: Object.fromEntries(results.map((r) => [r.schema, r.applied.length])) };
    }),
  ]);
  try {
    await eventually(
      async () => {
        const { rows } = await gate.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        return rows[0]!.n >= 5 ? true : undefined;
      },
      45_000,
      100,
    );
  } finally {
    await gate.end(); // releases the lock
  }
  migrationRuns = await running;

  sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  // Redis buckets are per key id (`key:<id>`) under a fixed prefix: a fresh database would hand out
  // id 1 again, so key ids start at a random point and this run's counts are its own.
  await sql.query(`ALTER SEQUENCE identity.api_keys_id_seq RESTART WITH ${randomInt(1_000_000, 2_000_000_000)}`);
  identityDb = createIdentityClient(db.url);
  store = createIdentityStore(identityDb);
  orgId = ((await runAdminCommand(["org", "create", "--name", "Replicas"], store)) as { id: number }).id;
  const { key } = (await runAdminCommand(["key", "create", "--org", String(orgId), "--scopes", "all", "--rate-limit", "1000000"], store)) as {
    key: string;
  };
  auth = { authorization: `Bearer ${key}` };

  nc = await connectNats({ url: nats.url, name: "test", logger });
  // Every service ensures the streams at boot. On a fresh nats-server, replicas doing so at the same
  // moment can crash one of them: a second concurrent add of SCANS_DLQ (a sourced stream) is refused
  // with "stream name already in use with a different configuration" (nats-server 2.9), and
  // ensureStreams does not fall back to update. A restarted pod then boots fine; here the streams
  // exist first, as the other ops tests do it.
  await ensureStreams(nc);

  // All eight at once, as a rollout would start them.
  const ports = [await freePort(), await freePort()];
  for (const port of ports) apiUrls.push(`http://127.0.0.1:${port}`);
  const gatewayEnv = (port: number) => ({
    PORT: String(port),
    HOST: "127.0.0.1",
    REDIS_URL,
    RATE_LIMIT_WINDOW_MS: String(RATE_LIMIT_WINDOW_MS),
    RPC_TIMEOUT_MS: "15000",
  });
  const started = await Promise.all([
    start("gateway", gatewayEnv(ports[0]!)),
    start("gateway", gatewayEnv(ports[1]!)),
    start("catalog"),
    start("catalog"),
    start("tracking", TRACKING_ENV),
    start("tracking", TRACKING_ENV),
    start("reporting", REPORTING_ENV),
    start("reporting", REPORTING_ENV),
  ]);
  for (const proc of started) await waitForReadiness(proc, 200, 60_000);
  // The API's /readyz: NATS and every backend answering.
  for (const url of apiUrls) {
    await eventually(async () => ((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).status === 200 ? true : undefined), 30_000, 200);
  }
}, 120_000);

afterAll(async () => {
  for (const p of procs) p.kill();
  await Promise.all(procs.map((p) => p.exit));
  await nc?.close();
  await sql?.end();
  await identityDb?.$disconnect();
  await nats?.destroy();
  await db?.drop();
});

describe("replicas: 2 gateways, 2 catalogs, 2 trackings, 2 reportings", () => {
  it("migrations started together apply once: one _prisma_migrations row per migration directory", async () => {
    const perSchema: Record<string, { dirs: number; rows: number; applied: number }> = {};
    for (const { schema } of SCHEMAS) {
      const dirs = (await readdir(migrationsDir(schema), { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name).sort();
      const { rows } = await sql.query<{ migration_name: string; n: number }>(
        `SELECT migration_name, count(*)::int AS n FROM "${schema}"."_prisma_migrations"
          WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL GROUP BY migration_name ORDER BY migration_name`,
      );
      expect(rows, schema).toEqual(dirs.map((migration_name) => ({ migration_name, n: 1 })));
      const { rows: all } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}"."_prisma_migrations"`);
      expect(all[0]!.n, schema).toBe(dirs.length);
      // Each migration was applied by exactly one of the runners; the others found it done.
      const applied = migrationRuns.reduce((sum, run) => sum + (run.applied[schema] ?? 0), 0);
      expect(applied, schema).toBe(dirs.length);
      perSchema[schema] = { dirs: dirs.length, rows: all[0]!.n, applied };
    }
    // Every runner reported on every schema (the processes' summaries parsed).
    for (const run of migrationRuns) expect(Object.keys(run.applied).sort(), run.runner).toEqual(SCHEMAS.map((s) => s.schema).sort());
    summary("migrations", { runners: migrationRuns.length, per_schema: perSchema, by_runner: migrationRuns });
  });

  it("requests spread over both catalog replicas (each one's /metrics)", async () => {
    const subjects = ["catalog.asset.create", "catalog.asset.list"];
    const served = async () =>
      Promise.all(
        replicas.catalog.map(async (p) => {
          const samples = await scrapeMetrics(p);
          return subjects.reduce((sum, subject) => sum + sumMetric(samples, "whereabouts_rpc_requests_total", { subject }), 0);
        }),
      );
    const httpServed = async () =>
      Promise.all(
        replicas.gateway.map(async (p) => sumMetric(await scrapeMetrics(p), "whereabouts_http_requests_total", { route: "/api/v1/assets" })),
      );
    const before = await served();
    const httpBefore = await httpServed();

    const REQUESTS = 200;
    const statuses = await inPool(
      Array.from({ length: REQUESTS }, (_, i) => i),
      8,
      async (i) =>
        (i % 4 < 2 ? await api(i % 2, "POST", "/api/v1/assets", { name: `Spread ${i}` }) : await api(i % 2, "GET", "/api/v1/assets?limit=5"))
          .status,
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(REQUESTS / 2);
    expect(statuses.filter((s) => s === 200)).toHaveLength(REQUESTS / 2);

    const perCatalog = (await served()).map((n, i) => n - before[i]!);
    const perGateway = (await httpServed()).map((n, i) => n - httpBefore[i]!);
    summary("spread", { requests: REQUESTS, per_catalog: perCatalog, per_gateway: perGateway });
    // Each request answered by exactly one replica, each replica a real share.
    expect(perCatalog.reduce((a, b) => a + b, 0)).toBe(REQUESTS);
    for (const n of perCatalog) expect(n).toBeGreaterThan(REQUESTS * 0.1);
    expect(perGateway).toEqual([REQUESTS / 2, REQUESTS / 2]);
  });

  it("every scan is processed exactly once while a tracking replica is SIGKILLed mid-stream", { timeout: 120_000 }, async () => {
    expect((await api(0, "POST", "/api/v1/locations", { name: "Replica dock", external_key: "REPLICA-DOCK" })).status).toBe(201);
    const assetIds = await inPool(
      Array.from({ length: SCAN_ASSETS }, (_, i) => i),
      4,
      async (i) => {
        const res = await api(i % 2, "POST", "/api/v1/assets", {
          name: `Scanned ${i}`,
          external_key: `SCANNED-${i}`,
          tags: [{ tag_type: "rfid", value: `REPLICA-TAG-${i}` }],
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return res.body.data.id as number;
      },
    );

    // The events: 1 to 5 distinct assets each, one second apart, so every history row has its own instant.
    const random = seeded(20261120);
    const base = Date.parse("2026-06-01T00:00:00Z");
    const expectedPerAsset = new Map<number, number>(assetIds.map((id) => [id, 0]));
    const events = Array.from({ length: SCAN_EVENTS }, (_, i) => {
      const picked = new Set<number>();
      const k = 1 + Math.floor(random() * 5);
      while (picked.size < k) picked.add(Math.floor(random() * SCAN_ASSETS));
      for (const a of picked) expectedPerAsset.set(assetIds[a]!, expectedPerAsset.get(assetIds[a]!)! + 1);
      return {
        event_id: `replicas-${i}-${randomUUID()}`,
        observed_at: new Date(base + i * 1000).toISOString(),
        location: { external_key: "REPLICA-DOCK" },
        tags: [...picked].map((a) => ({ tag_type: "rfid", value: `REPLICA-TAG-${a}` })),
      };
    });
    const expectedRows = [...expectedPerAsset.values()].reduce((a, b) => a + b, 0);

    // Publishing stops halfway until the victim has been killed; the killer waits until the
    // victim has processed scans of its own, so it dies holding a share of the stream.
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const [victim, survivor] = replicas.tracking as [ServiceProcess, ServiceProcess];
    const scansProcessed = async (p: ServiceProcess) =>
      sumMetric(await scrapeMetrics(p), "whereabouts_consumer_messages_processed_total", { durable: DURABLES.trackingScans });
    let published = 0;
    let release!: () => void;
    const killed = new Promise<void>((r) => (release = r));
    const HALF = SCAN_EVENTS / 2;
    const publishing = inPool(events, 16, async (event, i) => {
      if (i >= HALF) await killed;
      const ack = await js.publish(scanSubject(orgId, `reader-${i % 3}`), encodeJson(event), { msgID: event.event_id, timeout: 20_000 });
      expect(ack.duplicate).toBe(false);
      published++;
    });
    const killer = (async () => {
      try {
        await eventually(async () => (published >= HALF / 2 && (await scansProcessed(victim)) > 0 ? true : undefined), 40_000, 50);
        const inFlight = (await jsm.consumers.info(STREAMS.SCANS.name, DURABLES.trackingScans)).num_ack_pending;
        const victimProcessed = await scansProcessed(victim);
        victim.child.kill("SIGKILL");
        await victim.exit;
        return { victimProcessedBeforeKill: victimProcessed, publishedAtKill: published, unackedAtKill: inFlight };
      } finally {
        release();
      }
    })();
    const kill = await killer;
    await publishing;
    expect(published).toBe(SCAN_EVENTS);
    expect(kill.publishedAtKill).toBeLessThan(SCAN_EVENTS);

    // The victim comes back (a new process, as Kubernetes would restart it) while the survivor works.
    const restarted = await start("tracking", TRACKING_ENV);
    await waitForReadiness(restarted, 200, 60_000);

    // Done: everything published acked by the durable (so committed), and no redelivery left to come.
    await eventually(
      async () => {
        const info = await jsm.consumers.info(STREAMS.SCANS.name, DURABLES.trackingScans);
        return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      60_000,
      250,
    );
    const { rows: keys } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM tracking.scan_keys WHERE org_id = $1 AND key LIKE 'e:%'`, [orgId]);
    const { rows: totals } = await sql.query<{ total: number; distinct_rows: number }>(
      `SELECT count(*)::int AS total, count(DISTINCT (asset_id, observed_key >> 4))::int AS distinct_rows
         FROM tracking.history WHERE org_id = $1`,
      [orgId],
    );
    const { rows: perAsset } = await sql.query<{ asset_id: number; n: number }>(
      `SELECT asset_id, count(*)::int AS n FROM tracking.history WHERE org_id = $1 GROUP BY asset_id ORDER BY asset_id`,
      [orgId],
    );
    // Through the API as well, alternating gateways (and so tracking replicas).
    const apiTotals = await inPool(assetIds, 6, async (id, i) => {
      const res = await readFresh(i % 2, `/api/v1/assets/${id}/history?limit=1`);
      return res.body.total_count as number;
    });
    const dlq = await jsm.streams.info(STREAMS.SCANS_DLQ.name);
    const survivorProcessed = await scansProcessed(survivor);
    const restartedProcessed = await scansProcessed(restarted);
    const { total, distinct_rows } = totals[0]!;
    summary("scans", {
      events_published: SCAN_EVENTS,
      scans_processed: keys[0]!.n,
      history_rows: total,
      expected_rows: expectedRows,
      api_history_total: apiTotals.reduce((a, b) => a + b, 0),
      duplicates_found: total - distinct_rows,
      dead_lettered: dlq.state.messages,
      killed_replica: kill,
      processed_by: { survivor: survivorProcessed, restarted: restartedProcessed },
    });

    expect(keys[0]!.n).toBe(SCAN_EVENTS);
    expect(total - distinct_rows).toBe(0);
    expect(total).toBe(expectedRows);
    expect(Object.fromEntries(perAsset.map((r) => [r.asset_id, r.n]))).toEqual(Object.fromEntries(expectedPerAsset));
    expect(apiTotals).toEqual(assetIds.map((id) => expectedPerAsset.get(id)));
    expect(dlq.state.messages).toBe(0);
    expect(kill.victimProcessedBeforeKill).toBeGreaterThan(0);
    expect(survivorProcessed).toBeGreaterThan(0);
  });

  it("a key's rate limit holds across both gateways (Redis)", async () => {
    const { key, id } = (await runAdminCommand(["key", "create", "--org", String(orgId), "--scopes", "all", "--rate-limit", "20"], store)) as {
      key: string;
      id: number;
    };
    // Fixed windows: never straddle a boundary.
    const intoWindow = Date.now() % RATE_LIMIT_WINDOW_MS;
    if (intoWindow > RATE_LIMIT_WINDOW_MS - 10_000) {
      await eventually(async () => (Date.now() % RATE_LIMIT_WINDOW_MS < RATE_LIMIT_WINDOW_MS - 10_000 ? true : undefined), RATE_LIMIT_WINDOW_MS, 100);
    }

    const results: Array<{ gateway: number; status: number; remaining: string | null; retryAfter: string | null }> = [];
    for (let i = 0; i < 30; i++) {
      const res = await api(i % 2, "GET", "/api/v1/orgs/me", undefined, { authorization: `Bearer ${key}` });
      results.push({ gateway: i % 2, status: res.status, remaining: res.headers.get("ratelimit-remaining"), retryAfter: res.headers.get("retry-after") });
      if (res.status === 429) expect(res.body.error.type).toBe("rate_limited");
    }
    const limited = await Promise.all(
      replicas.gateway.map(async (p) => sumMetric(await scrapeMetrics(p), "whereabouts_rate_limited_total", { key_id: String(id) })),
    );
    summary("rate_limit", {
      limit: 20,
      sent: 30,
      ok: results.filter((r) => r.status === 200).length,
      limited: results.filter((r) => r.status === 429).length,
      limited_per_gateway: limited,
      remaining: results.map((r) => Number(r.remaining)),
    });

    expect(results.map((r) => r.status)).toEqual([...Array<number>(20).fill(200), ...Array<number>(10).fill(429)]);
    // One count for both: it goes down by one per request, whichever gateway answers.
    expect(results.map((r) => Number(r.remaining))).toEqual([...Array.from({ length: 20 }, (_, i) => 19 - i), ...Array<number>(10).fill(0)]);
    for (const r of results.slice(20)) expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    for (const r of results.slice(0, 20)) expect(r.retryAfter).toBeNull();
    expect(limited).toEqual([5, 5]);
  });

  it("read-your-writes across gateways: a write through one, a read through the other, never stale", { timeout: 120_000 }, async () => {
    expect((await api(0, "POST", "/api/v1/locations", { name: "RYW dock", external_key: "RYW-DOCK" })).status).toBe(201);
    const created = await inPool(
      Array.from({ length: RYW_ROUNDS + 1 }, (_, i) => i),
      4,
      async (i) => {
        const res = await api(i % 2, "POST", "/api/v1/assets", {
          name: i === 0 ? "RYW main" : `RYW doomed ${i}`,
          external_key: i === 0 ? "RYW-MAIN" : `RYW-DOOMED-${i}`,
          tags: [{ tag_type: "barcode", value: `RYW-TAG-${i}` }],
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return res.body.data.id as number;
      },
    );
    const [mainId, ...doomed] = created as [number, ...number[]];
    // All of them scanned once, so all are on the report.
    await jetstream(nc).publish(
      scanSubject(orgId, "ryw-reader"),
      encodeJson({
        event_id: randomUUID(),
        observed_at: new Date().toISOString(),
        location: { external_key: "RYW-DOCK" },
        tags: created.map((_, i) => ({ tag_type: "barcode", value: `RYW-TAG-${i}` })),
      }),
    );
    await eventually(
      async () => {
        const res = await api(1, "GET", "/api/v1/reports/asset-locations?location_external_key=RYW-DOCK&limit=1");
        return res.body?.total_count === RYW_ROUNDS + 1 ? true : undefined;
      },
      30_000,
      200,
    );

    let reads = 0;
    const read = async (g: number, url: string) => {
      reads++;
      return readFresh(g, url);
    };
    const startedAt = Date.now();
    for (let i = 0; i < RYW_ROUNDS; i++) {
      const w = i % 2; // writes through gateway w, reads through the other
      const r = 1 - w;
      const assetKey = `RYW-MAIN-${i}`;
      // The newest-changed page of the whole organization: the catalogs keep such pages (page-cache.ts).
      const newest = "/api/v1/assets?sort=-updated_at&limit=1";
      expect((await api(r, "GET", newest)).status).toBe(200);
      const renamed = await api(w, "POST", `/api/v1/assets/${mainId}/rename`, { external_key: assetKey });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      const [got, listed, reported, page] = await Promise.all([
        read(r, `/api/v1/assets/${mainId}`),
        read(r, `/api/v1/assets?external_key=${assetKey}`),
        read(r, `/api/v1/reports/asset-locations?asset_id=${mainId}`),
        read(r, newest),
      ]);
      expect(got.body.data.external_key, `round ${i}: asset`).toBe(assetKey);
      expect(listed.body.data.map((a: { id: number }) => a.id), `round ${i}: list`).toEqual([mainId]);
      expect(page.body.data.map((a: { external_key: string }) => a.external_key), `round ${i}: whole-organization page`).toEqual([assetKey]);
      expect(reported.body.data[0]?.asset_external_key, `round ${i}: report`).toBe(assetKey);

      const tagValue = `ryw-${i}-${randomUUID()}`;
      const tagged = await api(w, "POST", `/api/v1/assets/${mainId}/tags`, { tag_type: "ble", value: tagValue });
      expect(tagged.status, JSON.stringify(tagged.body)).toBe(201);
      const [withTag, byTag] = await Promise.all([
        read(r, `/api/v1/assets/${mainId}`),
        read(r, `/api/v1/reports/asset-locations?q=${tagValue}`),
      ]);
      expect(withTag.body.data.tags.map((t: { value: string }) => t.value), `round ${i}: asset tags`).toContain(tagValue);
      expect(byTag.body.data.map((row: { asset_id: number }) => row.asset_id), `round ${i}: report by tag`).toEqual([mainId]);

      const deleted = await api(w, "DELETE", `/api/v1/assets/${doomed[i]}`);
      expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
      const [gone, goneList, goneReport] = await Promise.all([
        read(r, `/api/v1/assets/${doomed[i]}`),
        read(r, `/api/v1/assets?external_key=RYW-DOOMED-${i + 1}`),
        read(r, `/api/v1/reports/asset-locations?asset_id=${doomed[i]}`),
      ]);
      expect(gone.status, `round ${i}: deleted asset`).toBe(404);
      expect(goneList.body.data, `round ${i}: list after delete`).toEqual([]);
      expect(goneReport.body.data, `round ${i}: report after delete`).toEqual([]);
    }
    const perReporting = await Promise.all(
      replicas.reporting.map(async (p) =>
        sumMetric(await scrapeMetrics(p), "whereabouts_rpc_requests_total", { subject: "reporting.report.asset_locations" }),
      ),
    );
    summary("read_your_writes", { rounds: RYW_ROUNDS, reads_after_writes: reads, stale: 0, unavailable_retried: unavailableRetries, ms: Date.now() - startedAt, report_requests_per_reporting: perReporting });
    expect(reads).toBe(RYW_ROUNDS * 9);
    for (const n of perReporting) expect(n).toBeGreaterThan(0);
  });
});
