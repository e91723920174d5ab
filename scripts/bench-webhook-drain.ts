/**
 * The webhook dispatcher alone (EXTENSIONS.md section 4): a fresh database
 * with 100 webhooks and 250 events, so 25,000 deliveries are due at once; one
 * dispatcher drains them to a receiver in this process. Prints, per run, the
 * rate and what each delivery cost: the CPU time of the dispatcher's Postgres
 * backends (read from /proc, so Linux and a local server only), this
 * process's CPU time (dispatcher and receiver). On a shared machine the rate
 * varies a lot; the CPU times much less. (No WAL figure: the WAL position is
 * the whole server's, other databases' writes included.)
 *
 *   npx tsx scripts/bench-webhook-drain.ts [--runs 3]
 *
 * Needs Postgres (DATABASE_URL's server).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createLogger, createPool } from "@whereabouts/shared";
import { createTestDatabase } from "@whereabouts/shared/testing";
import { migrateAll } from "./migrate.ts";
import { startWebhookDispatcher } from "../services/reporting/src/webhooks/dispatcher.ts";
import { createTargetGuard } from "../services/reporting/src/webhooks/target-guard.ts";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3" } } });
const WEBHOOKS = 100;
const EVENTS = 250;
const DELIVERIES = WEBHOOKS * EVENTS;

/** utime + stime of a process, in microseconds (Linux clock ticks are 10 ms). */
function cpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

const db = await createTestDatabase("webhook_drain");
try {
  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  let received = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received++;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const receiver = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook/`;
  const setup = createPool(db.url, 1);
  for (let run = 1; run <= Number(args.runs); run++) {
    await setup.query(`TRUNCATE reporting.webhooks, reporting.partner_events, reporting.webhook_deliveries, reporting.webhook_attempts RESTART IDENTITY`);
    await setup.query(
      `INSERT INTO reporting.webhooks (org_id, url, types, secret) SELECT 1, $1 || g, '{asset.moved}', 'whsec_bench' FROM generate_series(1, $2::int) g`,
      [receiver, WEBHOOKS],
    );
    await setup.query(
      `INSERT INTO reporting.partner_events (id, org_id, type, occurred_at, occurred, ordering_key, source_id, data)
       SELECT 'ev' || g, 1, 'asset.moved', now()::text, now(), 'asset:' || g, 'bench-' || g, json_build_object('asset_id', g)
         FROM generate_series(1, $1::int) g`,
      [EVENTS],
    );
    // As the projection queues them: event by event, every webhook.
    await setup.query(
      `INSERT INTO reporting.webhook_deliveries (webhook_id, org_id, event_seq, ordering_key)
       SELECT w.id, 1, e.seq, e.ordering_key FROM reporting.partner_events e CROSS JOIN reporting.webhooks w ORDER BY e.seq, w.id`,
    );
    for (const table of ["webhooks", "partner_events", "webhook_deliveries"]) await setup.query(`ANALYZE reporting.${table}`);
    received = 0;
    const pool = createPool(db.url, 10);
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    const dispatcher = startWebhookDispatcher({ pool, guard: createTargetGuard(true), logger: createLogger("drain", "warn") });
    const deadline = started + 300_000;
    while (received < DELIVERIES && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const seconds = (performance.now() - started) / 1000;
    await dispatcher.stop();
    const cpu = process.cpuUsage(cpu0);
    const { rows: backends } = await setup.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    const pgMicros = backends.reduce((sum, b) => sum + cpuMicros(b.pid), 0);
    await pool.end();
    console.log(
      `run ${run}: ${received} of ${DELIVERIES} delivered in ${seconds.toFixed(2)} s (${Math.round(received / seconds)}/s); per delivery: ` +
        `Postgres CPU ${Math.round(pgMicros / received)} µs, this process's CPU ${Math.round((cpu.user + cpu.system) / received)} µs`,
    );
  }
  await setup.end();
  server.closeAllConnections();
  server.close();
} finally {
  await db.drop();
}
