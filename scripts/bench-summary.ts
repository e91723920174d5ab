/**
 * Benchmark of GET /api/v1/locations/<id>/summary at scale: a fresh database
 * with a 10,000-location tree (each location ten children, five levels) and
 * 1,000,000 scanned assets placed over it, seeded straight into reporting's
 * tables with SQL (about 2% with an expiry, 0.5% not yet valid, 1% deleted,
 * some locations expired). Then the summary of the root, a mid-level location
 * (about 1,100 below it) and a leaf, each measured as the gateway calls it:
 * the reporting RPC over NATS (validation, read-your-writes catch-up, the
 * roll-up queries, JSON). Prints p50/p95/max per location and the plan of
 * the root's count query (EXPLAIN ANALYZE).
 *
 *   npm run bench:summary [-- --assets 1000000 --locations 10000 --iterations 200 --keep]
 *
 * Needs Postgres (DATABASE_URL's server) and nats-server on PATH.
 */
import { parseArgs } from "node:util";
import { connectNats, createLogger, decodeRpcReply, encodeJson, ensureStreams, LOCATION_SUMMARY_OPERATION, migrate, migrationsDir, rpcSubject, type RpcRequest } from "@whereabouts/shared";
import { createTestDatabase, startTestNats } from "@whereabouts/shared/testing";
import { startReporting } from "../services/reporting/src/app.ts";
import { createReportingDb } from "../services/reporting/src/reporting-db.ts";
import { percentile } from "./bench/latency-stats.ts";

const { values: args } = parseArgs({
  options: {
    assets: { type: "string", default: "1000000" },
    locations: { type: "string", default: "10000" },
    iterations: { type: "string", default: "200" },
    keep: { type: "boolean", default: false },
  },
});
const ASSETS = Number(args.assets);
const LOCATIONS = Number(args.locations);
const ITERATIONS = Number(args.iterations);
const ORG = 1;

/** Location i (i >= 2) hangs under (i - 2) / 10 + 1: ten children each, ids in breadth-first order. */
async function seed(db: ReturnType<typeof createReportingDb>) {
  await db.$executeRawUnsafe(`ALTER TABLE reporting.assets DISABLE TRIGGER USER`);
  await db.$executeRawUnsafe(`ALTER TABLE reporting.positions DISABLE TRIGGER USER`);
  await db.$executeRawUnsafe(
    `INSERT INTO reporting.locations (org_id, location_id, version, external_key, valid_from, valid_to, deleted_at)
     SELECT $1, g, 1, 'LOC-' || g, now() - interval '1 year', CASE WHEN g % 997 = 0 THEN now() - interval '1 day' END, NULL
       FROM generate_series(1, $2::int) g`,
    ORG,
    LOCATIONS,
  );
  await db.$executeRawUnsafe(
    `INSERT INTO reporting.location_rollups (org_id, location_id, parent_id)
     SELECT $1, g, CASE WHEN g > 1 THEN (g - 2) / 10 + 1 END FROM generate_series(1, $2::int) g`,
    ORG,
    LOCATIONS,
  );
  await db.$executeRawUnsafe(
    `WITH RECURSIVE up(descendant_id, ancestor_id) AS (
       SELECT location_id, location_id FROM reporting.location_rollups WHERE org_id = $1
       UNION ALL
       SELECT u.descendant_id, r.parent_id FROM up u JOIN reporting.location_rollups r ON r.org_id = $1 AND r.location_id = u.ancestor_id
        WHERE r.parent_id IS NOT NULL)
     INSERT INTO reporting.location_closure (org_id, ancestor_id, descendant_id) SELECT $1, ancestor_id, descendant_id FROM up`,
    ORG,
  );
  // Assets over every location (more at the leaves, as in a warehouse: a leaf is a shelf).
  await db.$executeRawUnsafe(
    `WITH s AS (SELECT g AS asset_id,
                       CASE WHEN g % 5 = 0 THEN 1 + ((g::bigint * 7919) % $3::int)::int ELSE 1112 + ((g::bigint * 7919) % ($3::int - 1111))::int END AS location_id,
                       now() - interval '1 year' AS valid_from0, g
                  FROM generate_series(1, $2::int) g),
     a AS (INSERT INTO reporting.assets (org_id, asset_id, catalog_version, external_key, name, name_lower, external_key_lower,
                                         valid_from, valid_to, deleted_at, scanned)
           SELECT $1, asset_id, 1, 'AST-' || g, 'Asset ' || g, 'asset ' || g, 'ast-' || g,
                  CASE WHEN g % 199 = 0 THEN now() + interval '30 days' ELSE valid_from0 END,
                  CASE WHEN g % 53 = 0 THEN now() + interval '30 days' WHEN g % 211 = 0 THEN now() - interval '1 day' END,
                  CASE WHEN g % 101 = 0 THEN now() - interval '3 days' END, true
             FROM s)
     INSERT INTO reporting.positions (org_id, asset_id, location_id, last_seen_at, last_seen_seq)
     SELECT $1, asset_id, location_id, now() - (g * 1.7) * interval '1 second', 1 FROM s`,
    ORG,
    ASSETS,
    LOCATIONS,
  );
  // The triggers' figures, computed once for the whole seed (as the migration does):
  // the currently effective assets per location, and the pending validity boundaries.
  await db.$executeRawUnsafe(
    `UPDATE reporting.location_rollups r SET assets_effective = x.n, last_seen_max = x.seen
       FROM (SELECT p.location_id,
                    count(*) FILTER (WHERE a.deleted_at IS NULL AND a.valid_from <= now() AND (a.valid_to IS NULL OR a.valid_to > now()))::int AS n,
                    max(p.last_seen_at) AS seen
               FROM reporting.positions p JOIN reporting.assets a ON a.org_id = p.org_id AND a.asset_id = p.asset_id
              WHERE p.org_id = $1 GROUP BY p.location_id) x
      WHERE r.org_id = $1 AND r.location_id = x.location_id`,
    ORG,
  );
  await db.$executeRawUnsafe(
    `INSERT INTO reporting.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
     SELECT p.org_id, p.asset_id, b.at, p.location_id, b.delta
       FROM reporting.positions p JOIN reporting.assets a ON a.org_id = p.org_id AND a.asset_id = p.asset_id
      CROSS JOIN LATERAL (VALUES (a.valid_from, 1::smallint), (a.valid_to, -1::smallint)) b(at, delta)
      WHERE p.org_id = $1 AND a.external_key IS NOT NULL AND a.deleted_at IS NULL AND b.at > now()
        AND (a.valid_to IS NULL OR a.valid_to > a.valid_from)`,
    ORG,
  );
  await db.$executeRawUnsafe(`ALTER TABLE reporting.assets ENABLE TRIGGER USER`);
  await db.$executeRawUnsafe(`ALTER TABLE reporting.positions ENABLE TRIGGER USER`);
  for (const table of ["assets", "positions", "locations", "location_rollups", "location_rollup_transitions", "location_closure"]) {
    await db.$executeRawUnsafe(`VACUUM ANALYZE reporting.${table}`);
  }
}

async function main() {
  const logger = createLogger("bench", "warn");
  const database = await createTestDatabase("bench_summary");
  const nats = await startTestNats();
  const nc = await connectNats({ url: nats.url, name: "bench", logger });
  const db = createReportingDb(database.url, 4);
  let service: Awaited<ReturnType<typeof startReporting>> | undefined;
  try {
    await migrate({ connectionString: database.url, schema: "reporting", migrationsDir: migrationsDir("reporting") });
    await ensureStreams(nc);
    const seeded = Date.now();
    await seed(db);
    console.log(`seeded ${LOCATIONS} locations and ${ASSETS} scanned assets in ${Date.now() - seeded} ms`);
    service = await startReporting({ nc, logger, databaseUrl: database.url });

    const leaf = LOCATIONS;
    const targets: Array<[string, number]> = [["root", 1], ["mid-level (level 2)", 2], ["level 3", 12], ["leaf", leaf]];
    const rows: Array<Record<string, string | number>> = [];
    const fmt = (n: number) => Number(n.toFixed(1));
    for (const [name, id] of targets) {
      const envelope: RpcRequest = {
        request_id: "bench",
        principal: { key_id: 1, org_id: ORG, scopes: ["locations:read"] },
        method: "GET",
        route: "/api/v1/locations/:location_id/summary",
        path: `/api/v1/locations/${id}/summary`,
        params: { location_id: String(id) },
        query: {},
        body: undefined,
      };
      let data: Record<string, unknown> = {};
      const call = async () => {
        const msg = await nc.request(rpcSubject("reporting", LOCATION_SUMMARY_OPERATION), encodeJson(envelope), { timeout: 10_000 });
        const reply = decodeRpcReply(msg) as { status: number; body: { data: Record<string, unknown> } };
        if (reply.status !== 200) throw new Error(`${name}: ${JSON.stringify(reply.body)}`);
        data = reply.body.data;
      };
      for (let i = 0; i < 5; i++) await call();
      const times: number[] = [];
      for (let i = 0; i < ITERATIONS; i++) {
        const t0 = performance.now();
        await call();
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const below = Number((await db.$queryRawUnsafe<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM reporting.location_closure WHERE org_id = $1 AND ancestor_id = $2`, ORG, id))[0]!.n);
      rows.push({
        location: `${name} (id ${id})`,
        subtree_locations: below,
        assets_here: data.assets_here as number,
        assets_in_subtree: data.assets_in_subtree as number,
        p50_ms: fmt(percentile(times, 50)),
        p95_ms: fmt(percentile(times, 95)),
        max_ms: fmt(times[times.length - 1]!),
      });
    }
    console.table(rows);
    const plan = await db.$queryRawUnsafe<Array<{ "QUERY PLAN": string }>>(
      `EXPLAIN (ANALYZE, BUFFERS) WITH sub AS MATERIALIZED (
         SELECT c.descendant_id AS id FROM reporting.location_closure c
           JOIN reporting.locations l ON l.org_id = c.org_id AND l.location_id = c.descendant_id
          WHERE c.org_id = $1 AND c.ancestor_id = $2 AND l.deleted_at IS NULL AND l.valid_from <= now() AND (l.valid_to IS NULL OR l.valid_to > now()))
       SELECT COALESCE(sum(r.assets_effective), 0) FROM sub JOIN reporting.location_rollups r ON r.org_id = $1 AND r.location_id = sub.id`,
      ORG,
      1,
    );
    console.log("plan of the root's subtree count:\n" + plan.map((r) => r["QUERY PLAN"]).join("\n"));
    console.log(JSON.stringify({ assets: ASSETS, locations: LOCATIONS, iterations: ITERATIONS, results: rows }));
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
