/**
 * Ingestion benchmark: `npx tsx scripts/bench-ingest.ts [--assets 10000]
 * [--drain-events 20000] [--sustain-seconds 15] [--latency-rate 5000]
 * [--latency-seconds 10] [--keep]`.
 *
 * Runs on a private database (on DATABASE_URL's server) and a private
 * nats-server, with tracking as its own process (`services/tracking/src/main.ts`),
 * and prints:
 *   - drain: reads/s while tracking works off a backlog of events (10 tags each);
 *   - sustained: reads/s while this process publishes as fast as it can and
 *     tracking keeps up (publish start to last read recorded);
 *   - visibility: at a steady offered load (reads/s), the time from publishing a
 *     scan to seeing it through the history endpoint (tracking.history.list, the
 *     RPC the gateway forwards GET /api/v1/assets/{id}/history to), p50/p99;
 *   - history row size: pg_total_relation_size / rows (heap, index, total).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { openSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { jetstream } from "@nats-io/jetstream";
import {
  CatalogEvent,
  catalogEventSubject,
  connectNats,
  createLogger,
  encodeJson,
  ensureStreams,
  repoRoot,
  decodeRpcReply,
  scanSubject,
  type NatsConnection,
} from "@whereabouts/shared";
import { createTestDatabase, startTestNats } from "@whereabouts/shared/testing";
import pg from "pg";
import { migrateAll } from "./migrate.ts";
import { percentile } from "./bench/latency-stats.ts";
import { paced, publishAll } from "./bench/scan-publisher.ts";

const { values: args } = parseArgs({
  options: {
    assets: { type: "string", default: "10000" },
    locations: { type: "string", default: "50" },
    "drain-events": { type: "string", default: "20000" },
    "sustain-seconds": { type: "string", default: "15" },
    /** Offered load of the sustained phase, in reads/s (above capacity: the backlog grows). */
    "sustain-rate": { type: "string", default: "40000" },
    "latency-rate": { type: "string", default: "5000" },
    "latency-seconds": { type: "string", default: "10" },
    "batch-size": { type: "string", default: "" },
    keep: { type: "boolean", default: false },
    /** Append tracking's debug log (one line per batch, with timings) to this file. */
    "tracking-log": { type: "string", default: "" },
    /** Write V8 CPU profiles of the tracking process into this directory. */
    profile: { type: "string", default: "" },
  },
});
const ASSETS = Number(args.assets);
const LOCATIONS = Number(args.locations);
const TAGS_PER_EVENT = 10;
const ORG = 1;
const EPOCH = "2020-01-01T00:00:00.000Z";
const log = (message: string) => console.error(`[bench] ${message}`);

const logger = createLogger("bench", "silent");
const db = await createTestDatabase("bench_ingest");
const nats = await startTestNats();
let child: ChildProcess | undefined;

function rpcEnvelope(query: Record<string, string[]>, assetId?: number) {
  return {
    request_id: "bench",
    principal: { key_id: 0, org_id: ORG, scopes: ["assets:read"] },
    method: "GET",
    route: "/api/v1/assets/:asset_id/history",
    path: `/api/v1/assets/${assetId ?? 0}/history`,
    params: assetId ? { asset_id: String(assetId) } : {},
    query,
    body: null,
  };
}

async function trackingMetrics(nc: NatsConnection): Promise<{ readsRecorded: number; scansProcessed: number; catalogApplied: number } | undefined> {
  try {
    const msg = await nc.request("tracking.metrics", encodeJson(rpcEnvelope({})), { timeout: 2000 });
    const body = decodeRpcReply(msg).body as {
      scans: { readsRecorded: number; scansProcessed: number };
      replica: { catalogEventsApplied: number };
    };
    return { readsRecorded: body.scans.readsRecorded, scansProcessed: body.scans.scansProcessed, catalogApplied: body.replica.catalogEventsApplied };
  } catch {
    return undefined;
  }
}

async function startTrackingProcess(nc: NatsConnection): Promise<void> {
  const profile = args.profile ? ["--cpu-prof", `--cpu-prof-dir=${args.profile}`] : [];
  child = spawn(process.execPath, [...profile, "--import", "tsx", path.join(repoRoot, "services/tracking/src/main.ts")], {
    cwd: repoRoot,
    env: {
      ...process.env,
      NATS_URL: nats.url,
      DATABASE_URL: db.url,
      LOG_LEVEL: args["tracking-log"] ? "debug" : "warn",
      OPS_PORT: "0",
      ...(args["batch-size"] ? { TRACKING_SCAN_BATCH_SIZE: args["batch-size"] } : {}),
    },
    stdio: ["ignore", args["tracking-log"] ? openSync(args["tracking-log"], "a") : "inherit", "inherit"],
  });
  for (let i = 0; i < 300 && !(await trackingMetrics(nc)); i++) await sleep(100);
}

async function stopTrackingProcess(): Promise<void> {
  const proc = child;
  child = undefined;
  if (!proc || proc.exitCode !== null) return;
  await new Promise((resolve) => {
    proc.once("exit", resolve);
    proc.kill("SIGTERM");
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function* catalogEvents() {
  let n = 0;
  const event = (entity: "asset" | "location" | "tag", id: number, data: unknown) =>
    CatalogEvent.parse({
      version: 1,
      event_id: `bench-${++n}`,
      org_id: ORG,
      entity,
      entity_id: id,
      entity_version: 1,
      verb: "created",
      occurred_at: EPOCH,
      data,
    });
  const base = { description: null, is_active: true, valid_from: EPOCH, valid_to: null, created_at: EPOCH, updated_at: EPOCH, deleted_at: null, tags: [] };
  for (let i = 1; i <= LOCATIONS; i++) {
    yield event("location", i, { ...base, id: i, external_key: `LOC-${i}`, name: `Location ${i}`, parent_id: null, parent_external_key: null });
  }
  for (let i = 1; i <= ASSETS; i++) {
    yield event("asset", i, { ...base, id: i, external_key: `ASSET-${i}`, name: `Asset ${i}`, metadata: {}, location_id: null, location_external_key: null });
    yield event("tag", i, {
      id: i,
      tag_type: "rfid",
      value: `BENCH-${i}`,
      is_active: true,
      valid_from: EPOCH,
      valid_to: null,
      created_at: EPOCH,
      updated_at: EPOCH,
      owner_type: "asset",
      owner_id: i,
      deleted_at: null,
    });
  }
}

let clock = Date.parse("2026-01-01T00:00:00Z");
/** One event of 10 distinct random assets (asset ids > `reserved` only). */
function scanEvent(reserved = 0, extraAsset?: number) {
  const tags = new Set<number>();
  if (extraAsset) tags.add(extraAsset);
  while (tags.size < TAGS_PER_EVENT) tags.add(reserved + 1 + Math.floor(Math.random() * (ASSETS - reserved)));
  clock += 1;
  const observedAt = new Date(clock).toISOString();
  return {
    observedAt,
    data: encodeJson({
      observed_at: observedAt,
      location: { external_key: `LOC-${1 + Math.floor(Math.random() * LOCATIONS)}` },
      tags: [...tags].map((i) => ({ tag_type: "rfid", value: `BENCH-${i}` })),
    }),
  };
}

async function waitForReads(nc: NatsConnection, target: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await trackingMetrics(nc);
    if (m && m.readsRecorded >= target) return Date.now();
    if (Date.now() > deadline) throw new Error(`only ${m?.readsRecorded} of ${target} reads recorded`);
    await sleep(20);
  }
}

try {
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  const nc = await connectNats({ url: nats.url, name: "bench", logger });
  await ensureStreams(nc);
  const js = jetstream(nc);
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();

  // Seed the catalog replica through CATALOG.
  await startTrackingProcess(nc);
  const catalog = [...catalogEvents()];
  await publishAll(
    js,
    catalog.map((e) => ({ subject: catalogEventSubject(e.org_id, e.entity, e.verb), data: encodeJson(e), msgID: e.event_id })),
  );
  for (;;) {
    const m = await trackingMetrics(nc);
    if (m && m.catalogApplied >= catalog.length) break;
    await sleep(100);
  }
  log(`seeded ${LOCATIONS} locations, ${ASSETS} assets with one tag each`);

  // 1. Drain a backlog.
  await stopTrackingProcess();
  const drainEvents = Number(args["drain-events"]);
  await publishAll(js, (function* () {
    for (let i = 0; i < drainEvents; i++) yield { subject: scanSubject(ORG, "bench"), data: scanEvent().data };
  })());
  await startTrackingProcess(nc);
  const drainStart = Date.now();
  const drainEnd = await waitForReads(nc, drainEvents * TAGS_PER_EVENT, 600_000);
  const drainRate = (drainEvents * TAGS_PER_EVENT) / ((drainEnd - drainStart) / 1000);
  log(`drain: ${drainEvents} events in ${((drainEnd - drainStart) / 1000).toFixed(1)} s`);

  // 2. Sustained: offer a steady load above the target for N seconds while
  //    tracking ingests; the rate is what it recorded over that window.
  const sustainSeconds = Number(args["sustain-seconds"]);
  let before = (await trackingMetrics(nc))!.readsRecorded;
  const sustainStart = Date.now();
  const offeredEvents = await paced(Number(args["sustain-rate"]) / TAGS_PER_EVENT, sustainSeconds, () =>
    js.publish(scanSubject(ORG, "bench"), scanEvent().data),
  );
  const recorded = (await trackingMetrics(nc))!.readsRecorded - before;
  const sustainedRate = recorded / ((Date.now() - sustainStart) / 1000);
  const backlog = offeredEvents * TAGS_PER_EVENT - recorded;
  await waitForReads(nc, before + offeredEvents * TAGS_PER_EVENT, 600_000);
  log(`sustained: offered ${Math.round((offeredEvents * TAGS_PER_EVENT) / sustainSeconds)} reads/s for ${sustainSeconds} s, backlog at the end ${backlog} reads`);

  // 3. Visibility latency at a steady offered load. Probe assets 1..20 are only
  //    ever scanned by probes, one probe event in ten.
  const PROBES = 20;
  const rate = Number(args["latency-rate"]) / TAGS_PER_EVENT; // events/s
  const latencySeconds = Number(args["latency-seconds"]);
  const latencies: number[] = [];
  const probing: Array<Promise<void>> = [];
  let probeTurn = 0;
  before = (await trackingMetrics(nc))!.readsRecorded;
  const sent = await paced(rate, latencySeconds, (n) => {
    if (n % 10 !== 0) return js.publish(scanSubject(ORG, "bench"), scanEvent(PROBES).data);
    const probeAsset = 1 + (probeTurn++ % PROBES);
    const { observedAt, data } = scanEvent(PROBES, probeAsset);
    const t0 = performance.now();
    const ack = js.publish(scanSubject(ORG, "bench"), data);
    probing.push(
      (async () => {
        await ack;
        for (;;) {
          const msg = await nc.request("tracking.history.list", encodeJson(rpcEnvelope({ limit: ["1"] }, probeAsset)), { timeout: 5000 });
          const body = decodeRpcReply(msg).body as { data: Array<{ event_observed_at: string }> };
          if (body.data[0] && body.data[0].event_observed_at >= observedAt) break;
          await sleep(5);
        }
        latencies.push(performance.now() - t0);
      })(),
    );
    return ack;
  });
  await Promise.all(probing);
  const offered = (sent * TAGS_PER_EVENT) / latencySeconds;
  await waitForReads(nc, before + sent * TAGS_PER_EVENT, 120_000);
  latencies.sort((a, b) => a - b);

  // 4. History row size.
  await sql.query("VACUUM ANALYZE tracking.history");
  const { rows } = await sql.query(`
    SELECT count(*)::bigint AS n,
           pg_total_relation_size('tracking.history') AS total,
           pg_relation_size('tracking.history') AS heap,
           pg_indexes_size('tracking.history') AS indexes,
           pg_total_relation_size('tracking.scan_keys') AS keys
      FROM tracking.history`);
  const size = rows[0] as { n: string; total: string; heap: string; indexes: string; keys: string };
  const n = Number(size.n);
  await sql.end();

  const results = {
    drain_reads_per_s: Math.round(drainRate),
    sustained_reads_per_s: Math.round(sustainedRate),
    visibility: {
      offered_reads_per_s: Math.round(offered),
      samples: latencies.length,
      p50_ms: Math.round(percentile(latencies, 50)),
      p99_ms: Math.round(percentile(latencies, 99)),
      max_ms: Math.round(latencies[latencies.length - 1] ?? 0),
    },
    history: {
      rows: n,
      bytes_per_row_total: +(Number(size.total) / n).toFixed(1),
      bytes_per_row_heap: +(Number(size.heap) / n).toFixed(1),
      bytes_per_row_indexes: +(Number(size.indexes) / n).toFixed(1),
      scan_keys_bytes_per_read: +(Number(size.keys) / n).toFixed(1),
    },
  };
  console.log(`ingestion, events of ${TAGS_PER_EVENT} tags, ${ASSETS} assets, ${LOCATIONS} locations`);
  console.log(`  drain (backlog)      ${results.drain_reads_per_s} reads/s`);
  console.log(`  sustained            ${results.sustained_reads_per_s} reads/s`);
  console.log(
    `  visibility at ${results.visibility.offered_reads_per_s} reads/s: p50 ${results.visibility.p50_ms} ms, p99 ${results.visibility.p99_ms} ms (max ${results.visibility.max_ms} ms, ${results.visibility.samples} samples)`,
  );
  console.log(
    `  history row          ${results.history.bytes_per_row_total} B total (heap ${results.history.bytes_per_row_heap}, index ${results.history.bytes_per_row_indexes}) over ${n} rows; idempotency keys ${results.history.scan_keys_bytes_per_read} B/read`,
  );
  console.log(JSON.stringify(results));
  await nc.close();
} finally {
  await stopTrackingProcess();
  if (!args.keep) {
    await nats.destroy();
    await db.drop();
  } else {
    log(`kept database ${db.url} and nats ${nats.url} (stop it yourself)`);
  }
}
// A kept nats-server is a child process: do not wait for it.
process.exit(0);
