/**
 * The webhook dispatcher alone (EXTENSIONS.md section 4): a fresh database
 * with 100 webhooks and 250 events, so 25,000 deliveries are due at once; one
 * dispatcher drains them to a receiver in this process. Prints, per run, the
 * rate and what each delivery cost: the CPU time of the dispatcher's Postgres
 * backends (read from /proc, so Linux and a local server only), this
 * process's CPU time (the dispatcher's) and the receiver's (a child process). On a shared machine the rate
 * varies a lot; the CPU times much less. (No WAL figure: the WAL position is
 * the whole server's, other databases' writes included.)
 *
 *   npx tsx scripts/bench-webhook-drain.ts [--runs 3] [--pipelining 1]
 *
 * Needs Postgres (DATABASE_URL's server).
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createLogger, createPool } from "@whereabouts/shared";
import { createTestDatabase } from "@whereabouts/shared/testing";
import { migrateAll } from "./migrate.ts";
import { startWebhookDispatcher } from "../services/reporting/src/webhooks/dispatcher.ts";
import { createTargetGuard } from "../services/reporting/src/webhooks/target-guard.ts";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3" }, pipelining: { type: "string", default: "1" } } });
const RECEIVER = new URL("./bench-webhook-receiver.ts", import.meta.url).pathname;
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
  // The receiver runs in a child process, so this process's CPU time is the dispatcher's alone.
  const child = fork(RECEIVER, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  let received = 0;
  const port = await new Promise<number>((resolve) =>
    child.on("message", (m: { port?: number; received?: number }) => {
      if (m.port !== undefined) resolve(m.port);
      if (m.received !== undefined) received = m.received;
    }),
  );
  const receiver = `http://127.0.0.1:${port}/hook/`;
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
    child.send("reset");
    await new Promise<void>((resolve) => child.once("message", () => resolve()));
    received = 0;
    const receiverCpu0 = cpuMicros(child.pid!);
    const pool = createPool(db.url, 10);
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    const dispatcher = startWebhookDispatcher({
      pool,
      guard: createTargetGuard(true),
      logger: createLogger("drain", "warn"),
      pipelining: Number(args.pipelining),
    });
    const deadline = started + 300_000;
    while (received < DELIVERIES && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const seconds = (performance.now() - started) / 1000;
    await dispatcher.stop();
    const cpu = process.cpuUsage(cpu0);
    const receiverMicros = cpuMicros(child.pid!) - receiverCpu0;
    const { rows: backends } = await setup.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    const pgMicros = backends.reduce((sum, b) => sum + cpuMicros(b.pid), 0);
    await pool.end();
    // What was sent more than once, and why (a retried attempt, or a lease that ran out before its outcome was written).
    const { rows: repeats } = await setup.query<{ why: string; n: string }>(
      `SELECT coalesce(error, state || ' ' || coalesce(status_code::text, '')) AS why, count(*) AS n
         FROM reporting.webhook_attempts WHERE state <> 'delivered' OR attempt > 1 GROUP BY 1 ORDER BY 2 DESC LIMIT 5`,
    );
    if (repeats.length) console.log(`run ${run}: attempts other than a first delivery: ${repeats.map((r) => `${r.n}× ${r.why}`).join("; ")}`);
    console.log(
      `run ${run}: ${received} of ${DELIVERIES} delivered in ${seconds.toFixed(2)} s (${Math.round(received / seconds)}/s); per delivery: ` +
        `Postgres CPU ${Math.round(pgMicros / received)} µs, dispatcher's CPU ${Math.round((cpu.user + cpu.system) / received)} µs, ` +
        `receiver's CPU ${Math.round(receiverMicros / received)} µs`,
    );
  }
  await setup.end();
  child.kill();
} finally {
  await db.drop();
}
