/**
 * Benchmark of GET /api/v1/reports/asset-locations at scale: a fresh database
 * with 200,000 scanned assets in one organization (plus two neighbours of
 * 50,000 each), seeded straight into the reporting tables with SQL; then the
 * default page, q and the filters, each measured three ways:
 *   rpc  - the whole reporting endpoint over NATS (validation, read-your-writes
 *          catch-up, page + total_count, JSON), as the gateway calls it;
 *   sql  - page and total_count queries only;
 *   catch-up - the read-your-writes wait alone (both durables, idle streams).
 *
 *   npx tsx scripts/bench-report.ts [--assets 200000] [--iterations 40] [--keep]
 *
 * Needs Postgres (DATABASE_URL's server) and nats-server on PATH.
 */
import { parseArgs } from "node:util";
import {
  connectNats,
  createConsistencyGate,
  createLogger,
  decodeRpcReply,
  encodeJson,
  ensureStreams,
  migrate,
  migrationsDir,
  rpcSubject,
  type RpcRequest,
} from "@whereabouts/shared";
import { createTestDatabase, startTestNats } from "@whereabouts/shared/testing";
import { startReporting } from "../services/reporting/src/app.ts";
import { parseReportQuery } from "../services/reporting/src/report/report-query.ts";
import { createReportStore } from "../services/reporting/src/report/report-store.ts";
import { REPORTING_CONSUMERS } from "../services/reporting/src/handlers/stream-consumers.ts";
import { createReportingDb } from "../services/reporting/src/reporting-db.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { percentile } from "./bench/latency-stats.ts";

const { values: args } = parseArgs({
  options: {
    assets: { type: "string", default: "200000" },
    iterations: { type: "string", default: "40" },
    keep: { type: "boolean", default: false },
  },
});
const ASSETS = Number(args.assets);
const ITERATIONS = Number(args.iterations);
const ORG = 1;

const scenarios: Array<[string, string]> = [
  ["default page (-asset_last_seen)", ""],
  ["page 2 (offset=50)", "offset=50"],
  ["deep page (offset=10000)", "offset=10000"],
  ["limit=200", "limit=200"],
  ["include_deleted=true", "include_deleted=true"],
  ["sort=asset_external_key", "sort=asset_external_key"],
  ["sort=-location_external_key", "sort=-location_external_key"],
  ["q selective (asset key)", "q=ast-0123"],
  ["q selective (name word)", "q=walrus-8"],
  ["q selective (tag value)", "q=dead0a1b"],
  ["q broad (every name matches)", "q=asset"],
  ["q broad (every tag value matches)", "q=e280"],
  ["location_id (1 of 2000)", "location_id=17"],
  ["location_id x3", "location_id=17&location_id=18&location_id=19"],
  ["location_external_key", "location_external_key=LOC-0017"],
  ["asset_id x5", "asset_id=10&asset_id=20&asset_id=30&asset_id=40&asset_id=50"],
  ["asset_external_key x3", "asset_external_key=AST-000010&asset_external_key=AST-000020&asset_external_key=AST-000030"],
  ["location_id + q", "location_id=17&q=walrus"],
];

function toQuery(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of new URLSearchParams(text)) (out[k] ??= []).push(v);
  return out;
}

async function measure(fn: () => Promise<unknown>): Promise<{ p50: number; p95: number; max: number }> {
  for (let i = 0; i < 3; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p95: percentile(times, 95), max: times[times.length - 1]! };
}

async function seed(db: ReturnType<typeof createReportingDb>, orgId: number, assets: number, locations: number) {
  await db.$executeRawUnsafe(
    `INSERT INTO reporting.locations (org_id, location_id, version, external_key, valid_from, valid_to, deleted_at)
     SELECT $1, g, 1, 'LOC-' || lpad(g::text, 4, '0'), now() - interval '1 year',
            CASE WHEN g % 97 = 0 THEN now() - interval '1 day' END,
            CASE WHEN g % 89 = 0 THEN now() - interval '2 days' END
       FROM generate_series(1, $2::int) g`,
    orgId,
    locations,
  );
  const words = ["walrus", "otter", "heron", "lynx", "bison", "marten", "ibex", "crane"];
  await db.$executeRawUnsafe(
    `WITH s AS (SELECT * FROM (SELECT $1::int AS org_id, g AS asset_id, 'AST-' || lpad(g::text, 6, '0') AS external_key,
                    'Asset ' || g || ' ' || ($3::text[])[1 + g % 8] || '-' || (g % 100) AS name,
                    now() - interval '1 year' - g * interval '1 second' AS valid_from,
                    CASE WHEN g % 211 = 0 THEN now() - interval '1 day'
                         WHEN g % 53 = 0 THEN now() + interval '30 days' END AS valid_to,
                    CASE WHEN g % 101 = 0 THEN now() - interval '3 days' END AS deleted_at,
                    1 + (g * 7919) % $4::int AS location_id,
                    now() - (g * 1.7) * interval '1 second' - (random() * 5) * interval '1 hour' AS last_seen_at
               FROM generate_series(1, $2::int) g) s),
     a AS (INSERT INTO reporting.assets (org_id, asset_id, catalog_version, external_key, name, name_lower, external_key_lower,
                                         valid_from, valid_to, deleted_at, scanned)
           SELECT org_id, asset_id, 1, external_key, name, lower(name), lower(external_key), valid_from, valid_to, deleted_at, true
             FROM s)
     INSERT INTO reporting.positions (org_id, asset_id, location_id, last_seen_at, last_seen_seq)
     SELECT org_id, asset_id, location_id, last_seen_at, asset_id FROM s`,
    orgId,
    assets,
    words,
    locations,
  );
  await db.$executeRawUnsafe(
    `INSERT INTO reporting.tags (org_id, tag_id, version, asset_id, tag_type, value, value_lower, is_active, valid_from, valid_to, deleted_at)
     SELECT org_id, tag_id, 1, asset_id, tag_type, value, lower(value), is_active, valid_from, NULL, deleted_at
       FROM (SELECT $1::int AS org_id, g AS tag_id, 1 + (g - 1) % $2::int AS asset_id,
                    CASE WHEN g > $2::int THEN 'barcode' ELSE 'rfid' END AS tag_type,
                    'E280' || upper(to_hex(3735879680 + g)) AS value, g % 13 <> 0 AS is_active,
                    now() - interval '1 year' AS valid_from,
                    CASE WHEN g % 17 = 0 THEN now() - interval '1 day' END AS deleted_at
               FROM generate_series(1, ($2::int * 11) / 10) g) s`,
    orgId,
    assets,
  );
}

async function main() {
  const logger = createLogger("bench", "warn");
  const database = await createTestDatabase("bench_report");
  const nats = await startTestNats();
  const nc = await connectNats({ url: nats.url, name: "bench", logger });
  const db = createReportingDb(database.url, 4);
  let service: Awaited<ReturnType<typeof startReporting>> | undefined;
  try {
    await migrate({ connectionString: database.url, schema: "reporting", migrationsDir: migrationsDir("reporting") });
    await ensureStreams(nc);
    const seeded = Date.now();
    await seed(db, ORG, ASSETS, 2000);
    await seed(db, ORG + 1, Math.round(ASSETS / 4), 500);
    await seed(db, ORG + 2, Math.round(ASSETS / 4), 500);
    await db.$executeRawUnsafe("VACUUM ANALYZE reporting.assets");
    await db.$executeRawUnsafe("VACUUM ANALYZE reporting.positions");
    await db.$executeRawUnsafe("VACUUM ANALYZE reporting.locations");
    await db.$executeRawUnsafe("VACUUM ANALYZE reporting.tags");
    console.log(`seeded ${ASSETS} scanned assets in org ${ORG} (+${Math.round(ASSETS / 2)} in two others) in ${Date.now() - seeded} ms`);

    service = await startReporting({ nc, logger, databaseUrl: database.url });
    const store = createReportStore();
    const jsm = await jetstreamManager(nc);
    const gate = createConsistencyGate({
      jsm,
      stream: REPORTING_CONSUMERS.catalog.stream,
      durable: REPORTING_CONSUMERS.catalog.durable,
      timeoutMs: 2000,
    });
    const lastSeq = (await jsm.streams.info(REPORTING_CONSUMERS.catalog.stream)).state.last_seq;

    const rows: Array<Record<string, string | number>> = [];
    const fmt = (n: number) => Number(n.toFixed(1));
    const catchUp = await measure(() => gate.reach(lastSeq));
    rows.push({ scenario: "read-your-writes catch-up only", rows: "-", total: "-", ...mapTimes("rpc", catchUp), sql_p50: "-", sql_p95: "-" });

    for (const [name, text] of scenarios) {
      const query = parseReportQuery(toQuery(text));
      const envelope: RpcRequest = {
        request_id: "bench",
        principal: { key_id: 1, org_id: ORG, scopes: ["reports:read"] },
        method: "GET",
        route: "/api/v1/reports/asset-locations",
        path: "/api/v1/reports/asset-locations",
        params: {},
        query: toQuery(text),
        body: undefined,
      };
      let body: { data: unknown[]; total_count: number } | undefined;
      const rpc = await measure(async () => {
        const msg = await nc.request(rpcSubject("reporting", "report.asset_locations"), encodeJson(envelope), { timeout: 10_000 });
        const reply = decodeRpcReply(msg) as { status: number; body: { data: unknown[]; total_count: number } };
        if (reply.status !== 200) throw new Error(`${name}: ${JSON.stringify(reply.body)}`);
        body = reply.body;
      });
      const sql = await measure(() => Promise.all([store.page(db, ORG, query), store.count(db, ORG, query)]));
      rows.push({
        scenario: name,
        rows: body?.data.length ?? 0,
        total: body?.total_count ?? 0,
        ...mapTimes("rpc", rpc),
        sql_p50: fmt(sql.p50),
        sql_p95: fmt(sql.p95),
      });
    }
    console.table(rows);
    console.log(JSON.stringify({ assets: ASSETS, iterations: ITERATIONS, results: rows }));

    function mapTimes(prefix: string, t: { p50: number; p95: number; max: number }) {
      return { [`${prefix}_p50`]: fmt(t.p50), [`${prefix}_p95`]: fmt(t.p95), [`${prefix}_max`]: fmt(t.max) };
    }
  } finally {
    await service?.stop();
    await db.$disconnect();
    if (!nc.isClosed()) await nc.close();
    await nats.destroy();
    if (args.keep) console.log(`kept database ${database.url}`);
    else await database.drop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
