/**
 * `npm run bench [-- --quick] [--only a,b] [--soak] [--keep] [--json file]`:
 * starts a private stack (or measures BASE_URL's), seeds it, runs the chosen
 * cases, prints the machine and one results table to stdout (progress goes
 * to stderr), writes the full results as JSON, and stops everything it
 * started — on success, on error and on Ctrl-C alike.
 *
 * Exit status: 0 when every case ran (met or not), 1 when a case or the
 * setup failed, 2 on a bad command line.
 */
import os from "node:os";
import { judge, failedRow, type CaseRow } from "./bench-case.ts";
import { parseBenchOptions, UsageError, type BenchOptions } from "./bench-options.ts";
import { acquireStack, prepareContext } from "./bench-setup.ts";
import { CASES, COMPARED_TO_BASELINE, PASSIVE_CASES } from "./case-registry.ts";
import { cpuBetween } from "./cpu-meter.ts";
import { startLoadGenerator } from "./load-generator.ts";
import { describeMachine, formatMachine } from "./machine-info.ts";
import { clip, formatMs, formatResultsTable } from "./results-table.ts";
import { countLogLevels, defaultResultsFile, serviceLogFile, writeResults } from "./results-file.ts";
import { settleStack } from "./stack-settle.ts";
import { runWithTeardown, type Teardown } from "./teardown.ts";

const log = (message: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);

let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2), process.env);
} catch (err) {
  console.error(err instanceof UsageError ? err.message : err);
  process.exit(2);
}

function summarize(row: CaseRow): string {
  if (row.status !== "ok") return `${row.status}: ${row.note ?? ""}`;
  const rate = row.rate ? `${Math.round(row.rate.value)} ${row.rate.unit}` : (row.summary ?? "");
  const latency = row.latency ? `, p50 ${formatMs(row.latency.p50)}, p99 ${formatMs(row.latency.p99)}` : "";
  return `${rate}${latency}, non-2xx ${row.non2xx}, errors ${row.errors}`;
}

async function main({ teardown, isStopping }: { teardown: Teardown; isStopping: () => boolean }): Promise<number> {
  const startedAt = new Date();
  const wall = performance.now();
  const cases = [...options.cases];
  // A ratio needs its baseline measured in the same run.
  if (!cases.includes("baseline") && cases.some((c) => COMPARED_TO_BASELINE.includes(c))) cases.unshift("baseline");
  options = { ...options, cases };
  log(`profile ${options.profile.name}; cases: ${cases.join(", ")}`);

  const resultsFile = options.jsonFile ?? defaultResultsFile(startedAt);
  const serviceLog = serviceLogFile(resultsFile);
  const stack = await acquireStack(options, { serviceLog, teardown, log });
  const machine = await describeMachine(stack.databaseUrl);
  log(formatMachine(machine).replace(/\n/g, "; "));
  const load = startLoadGenerator(teardown);
  const { ctx, setup } = await prepareContext({ options, stack, load, teardown, log });

  const rows: CaseRow[] = [];
  for (const name of cases) {
    if (isStopping()) break;
    const c = CASES[name];
    const settle = PASSIVE_CASES.includes(name) ? undefined : await settleStack(ctx);
    if (settle && settle.ms > 1000) log(`waited ${(settle.ms / 1000).toFixed(1)} s for the stack to go quiet`);
    log(`case ${name} ...`);
    const t0 = performance.now();
    const caseStartedAt = Date.now();
    const cpuBefore = await ctx.cpu?.snapshot();
    let caseRows: CaseRow[];
    try {
      caseRows = await c.run(ctx);
    } catch (err) {
      caseRows = [failedRow(name, c.target, err)];
    }
    // Each case's own peak RSS per process: which case a run's peak (the rss rows) comes from.
    const casePeaks = ctx.rss ? Object.fromEntries(Object.entries(ctx.rss.peak(caseStartedAt)).map(([p, mb]) => [p, Math.round(mb)])) : undefined;
    // And the CPU seconds each part of the stack used in it.
    const caseCpu = cpuBefore && ctx.cpu ? cpuBetween(cpuBefore, await ctx.cpu.snapshot()) : undefined;
    for (const row of caseRows) {
      row.details.case_seconds = Math.round((performance.now() - t0) / 100) / 10;
      if (casePeaks) row.details.rss_peak_mb = casePeaks;
      if (caseCpu) row.details.cpu_seconds = caseCpu;
      if (settle) row.details.settle_before = { ms: Math.round(settle.ms), settled: settle.settled };
      log(`case ${row.name}: ${summarize(row)}`);
    }
    rows.push(...caseRows);
  }

  const baseline = rows.find((r) => r.name === "baseline" && r.status === "ok")?.rate?.value;
  for (const row of rows) {
    if (row.comparesToBaseline && row.rate && baseline) row.ratio = row.rate.value / baseline;
    row.met = judge(row);
  }

  const seconds = (performance.now() - wall) / 1000;
  // Others' work on a shared machine shows here: the figures are only as quiet as it was.
  const loadAverageAtEnd = os.loadavg().map((l) => Math.round(l * 100) / 100);
  console.log(formatMachine(machine));
  console.log(
    `run: profile ${options.profile.name}, ${stack.mode} stack, ${ctx.seed.assets.length} assets / ${ctx.seed.locations.length} locations seeded, ${Math.round(seconds)} s, load average at the end ${loadAverageAtEnd.join(" ")}`,
  );
  console.log("");
  console.log(formatResultsTable(rows));
  const notes = rows.filter((r) => r.note && r.status !== "skipped").map((r) => `  ${r.name}: ${clip(r.note!, 400)}`);
  if (notes.length) console.log(`\nnotes:\n${notes.join("\n")}`);
  const logged = stack.mode === "private" ? await countLogLevels(serviceLog) : undefined;
  if (logged) console.log(`\nservice logs: ${logged.errors} error lines, ${logged.warnings} warnings (${serviceLog})`);

  const file = await writeResults(resultsFile, {
    started_at: startedAt.toISOString(),
    seconds: Math.round(seconds),
    profile: options.profile,
    cases,
    stack: { mode: stack.mode, base_url: stack.baseUrl, nats_url: stack.natsUrl ?? null },
    machine: { ...machine, loadAverageAtEnd },
    setup,
    service_log: logged ? { file: serviceLog, ...logged } : null,
    results: rows,
  });
  log(`results written to ${file}`);

  if (options.keep && stack.mode === "private") {
    log(
      `--keep: the stack keeps running. BASE_URL=${stack.baseUrl} BENCH_API_KEY=${stack.apiKey} NATS_URL=${stack.natsUrl} BASELINE_DATABASE_URL=${stack.databaseUrl}`,
    );
    log("Ctrl-C stops the processes and the nats-server; the database stays");
    await new Promise<never>(() => setInterval(() => undefined, 1 << 30));
  }
  return rows.some((r) => r.status === "failed") ? 1 : 0;
}

runWithTeardown(main, log);
