/**
 * `npm run chaos [-- --rounds n]`: a private stack (database `wa_chaos_*`,
 * its own nats-server on a port in 14400-14499, the four processes apart so
 * each can be killed), seeded as the benchmark seeds it; scans published
 * while tracking, reporting, catalog and the broker are killed and restarted
 * in turn; then the invariants of chaos-run.ts. `npm run chaos -- --soak
 * [--minutes n]` (or `npm run soak`): the soak of soak-run.ts instead.
 *
 * Tables to stdout, progress to stderr, everything to
 * bench-results/{chaos,soak}-<time>.json. Exit status: 0 when every check
 * held, 1 when one did not or the run failed, 2 on a bad command line.
 */
import os from "node:os";
import type { BenchOptions } from "../bench/bench-options.ts";
import { UsageError } from "../bench/bench-options.ts";
import { prepareContext, type StackAccess } from "../bench/bench-setup.ts";
import { startLoadGenerator } from "../bench/load-generator.ts";
import type { LoadWindow } from "../bench/load-runner.ts";
import { describeMachine, formatMachine } from "../bench/machine-info.ts";
import { startPrivateStack } from "../bench/private-stack.ts";
import { countLogLevels, defaultResultsFile, serviceLogFile, writeResults } from "../bench/results-file.ts";
import { formatMs, formatTable } from "../bench/results-table.ts";
import { runWithTeardown, type Teardown } from "../bench/teardown.ts";
import { parseChaosOptions, type ChaosOptions } from "./chaos-options.ts";
import { runChaos, type ChaosResult } from "./chaos-run.ts";
import { RSS_GROWTH_LIMIT_PCT } from "./rss-trend.ts";
import { runSoak, type SoakResult } from "./soak-run.ts";

const log = (message: string) => console.error(`[chaos ${new Date().toISOString().slice(11, 19)}] ${message}`);

let options: ChaosOptions;
try {
  options = parseChaosOptions(process.argv.slice(2));
} catch (err) {
  console.error(err instanceof UsageError ? err.message : err);
  process.exit(2);
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const mb = (n: number) => `${n.toFixed(1)} MB`;

function printChaos(result: ChaosResult): boolean {
  console.log(
    formatTable(
      ["fault", "at", "down", "ready again after"],
      result.faults.map((f) => [f.fault, `${f.atSecond} s`, formatMs(f.downMs), formatMs(f.recoveredMs)]),
    ),
  );
  console.log("");
  console.log(
    formatTable(
      ["check", "expected", "actual", "ok"],
      result.checks.map((c) => [c.check, c.expected, c.actual, c.ok ? "yes" : "NO"]),
    ),
  );
  const ok = result.checks.every((c) => c.ok) && result.publish.failed === 0;
  const poison = Object.values(result.poison).reduce((a, b) => a + b, 0);
  console.log(
    `\nchaos: ${integer.format(result.scans)} scans (${integer.format(result.reads)} reads) and ${poison} poison messages over ${result.seconds} s, ` +
      `${result.faults.length} faults; lost ${result.lost}, duplicated ${result.duplicated}; ` +
      `publishes retried ${result.publish.retried} (already stored on retry ${result.publish.storedOnRetry}), failed ${result.publish.failed}; ` +
      (result.settleSeconds === null ? "did NOT settle" : `settled ${result.settleSeconds.toFixed(1)} s after publishing stopped`),
  );
  return ok;
}

function printSoak(result: SoakResult): boolean {
  const windows = (result.row.details.windows ?? []) as Array<LoadWindow & { scan_reads_offered: number }>;
  console.log(
    formatTable(
      ["window", "API req", "p50", "p99", "5xx", "non-2xx", "errors", "scan reads"],
      windows.map((w) => [
        `${w.fromSecond} s`,
        integer.format(w.requests),
        formatMs(w.latency.p50),
        formatMs(w.latency.p99),
        String(w.status5xx),
        String(w.non2xx),
        String(w.errors),
        integer.format(w.scan_reads_offered),
      ]),
    ),
  );
  console.log("");
  const s = result.windows.windowSeconds;
  console.log(
    formatTable(
      ["process", `RSS median, ${s} s after warm-up`, `RSS median, last ${s} s`, "growth", "peak", "flat"],
      result.trends.map((t) => [t.process, mb(t.firstMb), mb(t.lastMb), `${t.growthPct >= 0 ? "+" : ""}${t.growthPct.toFixed(1)}%`, mb(t.peakMb), t.flat ? "yes" : "NO"]),
    ),
  );
  const flat = result.trends.length > 0 && result.trends.every((t) => t.flat);
  const row = result.row;
  console.log(
    `\nsoak: ${integer.format(row.rate?.value ?? 0)} API req/s, p50 ${formatMs(row.latency?.p50)}, p99 ${formatMs(row.latency?.p99)}, ` +
      `5xx ${result.status5xx}, errors ${row.errors}; memory ${flat ? "flat" : "NOT flat"} (growth < ${RSS_GROWTH_LIMIT_PCT}% per process)`,
  );
  return flat && result.status5xx === 0 && row.errors === 0 && row.status === "ok";
}

async function main({ teardown }: { teardown: Teardown }): Promise<number> {
  const startedAt = new Date();
  const resultsFile = options.jsonFile ?? defaultResultsFile(startedAt, options.mode);
  const serviceLog = serviceLogFile(resultsFile);
  const stack = await startPrivateStack({
    keep: false,
    serviceLog,
    teardown,
    log,
    label: "chaos",
    databasePrefix: "wa_",
    natsPorts: { from: 14400, to: 14499 },
  });
  const machine = await describeMachine(stack.databaseUrl);
  log(formatMachine(machine).replace(/\n/g, "; "));
  const bench: BenchOptions = { profile: options.bench, cases: options.mode === "soak" ? ["soak"] : [], keep: false, apiSeed: false };
  const access: StackAccess = { mode: "private", ...stack };
  const { ctx, setup } = await prepareContext({ options: bench, stack: access, load: startLoadGenerator(teardown), teardown, log });

  let ok: boolean;
  let result: ChaosResult | SoakResult;
  const loadAverageAtStart = os.loadavg().map((l) => Math.round(l * 100) / 100);
  console.log(formatMachine(machine));
  if (options.mode === "chaos") {
    log(`chaos: ${options.chaos.readsPerSecond} reads/s over ${ctx.seed.assets.length} assets, ${options.chaos.rounds} round(s) of faults`);
    const chaos = await runChaos(ctx, stack, options.chaos, log);
    console.log(`run: chaos, ${ctx.seed.assets.length} assets / ${ctx.seed.locations.length} locations, load average at the start ${loadAverageAtStart.join(" ")}\n`);
    ok = printChaos(chaos);
    result = chaos;
  } else {
    log(`soak: ${options.bench.soakSeconds} s of ${options.bench.soakApiPerSecond} API req/s and ${options.bench.soakReadsPerSecond} reads/s`);
    const soak = await runSoak(ctx);
    console.log(`run: soak, ${options.bench.soakSeconds} s, ${ctx.seed.assets.length} assets / ${ctx.seed.locations.length} locations, load average at the start ${loadAverageAtStart.join(" ")}\n`);
    ok = printSoak(soak);
    result = soak;
  }
  const logged = await countLogLevels(serviceLog);
  console.log(`service logs: ${logged.errors} error lines, ${logged.warnings} warnings (${serviceLog})`);
  const file = await writeResults(resultsFile, {
    started_at: startedAt.toISOString(),
    mode: options.mode,
    ok,
    profile: { seed: options.bench, chaos: options.mode === "chaos" ? options.chaos : undefined },
    machine: { ...machine, loadAverageAtStart, loadAverageAtEnd: os.loadavg().map((l) => Math.round(l * 100) / 100) },
    setup,
    service_log: { file: serviceLog, ...logged },
    result,
  });
  log(`results written to ${file}`);
  return ok ? 0 : 1;
}

runWithTeardown(main, log);
