/**
 * Everything before the first case, none of it timed as a case: the stack
 * (started here, or the one BASE_URL names), NATS for the ingest cases, the
 * seed catalog, one scan of every pool asset so positions and the report
 * exist, the history-heavy asset, the baseline server, and idle RSS.
 */
import { jetstream } from "@nats-io/jetstream";
import { connectNats, createLogger } from "@whereabouts/shared";
import { createApiClient, OrgReply } from "./api-client.ts";
import type { BenchOptions } from "./bench-options.ts";
import type { BenchContext, IngestAccess } from "./bench-context.ts";
import { startBaselineServer } from "./baseline-process.ts";
import { bulkSeedCatalog } from "./catalog-bulk-seed.ts";
import { httpCatalogWriter, rpcCatalogWriter, seedCatalog, verifySeed, type CatalogSeed } from "./catalog-seed.ts";
import { COMPARED_TO_BASELINE } from "./case-registry.ts";
import type { CompletionWatch } from "./ingest-completion.ts";
import { runIngest } from "./ingest-run.ts";
import type { LoadGenerator } from "./load-generator.ts";
import { startPrivateStack, type RunningStack } from "./private-stack.ts";
import { cpuMeter } from "./cpu-meter.ts";
import { startRssSampler } from "./rss-sampler.ts";
import { IDLE_RSS_TARGET_MB } from "./cases/rss-case.ts";
import { assignRoles, FleetModel, MarkerScans, placementScans, ScanClock, ScanFactory } from "./scan-workload.ts";
import type { Teardown } from "./teardown.ts";

/** Assets kept out of the scan traffic for the visibility probes. */
const PROBE_ASSETS = 40;

export interface StackAccess {
  mode: "private" | "external";
  baseUrl: string;
  apiKey: string;
  orgId: number;
  natsUrl?: string;
  databaseUrl?: string;
  processes?: RunningStack["processes"];
}

export async function acquireStack(
  options: BenchOptions,
  o: { serviceLog: string; teardown: Teardown; log: (m: string) => void },
): Promise<StackAccess> {
  const { teardown, log } = o;
  if (!options.external) {
    const stack = await startPrivateStack({ keep: options.keep, serviceLog: o.serviceLog, teardown, log });
    return { mode: "private", ...stack };
  }
  const { baseUrl, apiKey, natsUrl, databaseUrl } = options.external;
  const me = await createApiClient(baseUrl, apiKey).get("/api/v1/orgs/me", OrgReply);
  log(`measuring ${baseUrl} (org ${me.data.id})${natsUrl ? `, scans to ${natsUrl}` : ", no NATS_URL: ingest cases skipped"}`);
  return { mode: "external", baseUrl, apiKey, orgId: me.data.id, natsUrl, databaseUrl };
}

export async function prepareContext(o: {
  options: BenchOptions;
  stack: StackAccess;
  load: LoadGenerator;
  teardown: Teardown;
  log: (m: string) => void;
}): Promise<{ ctx: BenchContext; setup: Record<string, unknown> }> {
  const { options, stack, teardown, log } = o;
  const profile = options.profile;
  const runId = Date.now().toString(36);
  const api = createApiClient(stack.baseUrl, stack.apiKey);
  const setup: Record<string, unknown> = {};

  let ingest: IngestAccess | undefined;
  if (stack.natsUrl) {
    const nc = await connectNats({ url: stack.natsUrl, name: "bench", logger: createLogger("bench", "silent") });
    teardown.add("bench NATS connection", () => nc.close());
    ingest = { nc, js: jetstream(nc) };
  }
  const watch: CompletionWatch = { api, orgId: stack.orgId, nc: ingest?.nc };

  // The baseline server starts while the seeding runs; it reads only at request time.
  const wantsBaseline = options.cases.some((c) => c === "baseline" || COMPARED_TO_BASELINE.includes(c));
  const baselineStarting: Promise<string | Error | undefined> =
    wantsBaseline && stack.databaseUrl
      ? startBaselineServer({ databaseUrl: stack.databaseUrl, orgId: stack.orgId, teardown }).catch((err: unknown) =>
          err instanceof Error ? err : new Error(String(err)),
        )
      : Promise.resolve(undefined);

  const seedOptions = { runId, locations: profile.locations, assets: profile.assets, zephyrEvery: profile.zephyrEvery, log };
  let seed: CatalogSeed;
  let seedVia: string;
  if (stack.mode === "private" && stack.databaseUrl && ingest && !options.apiSeed) {
    seedVia = "bulk SQL + catalog events";
    log(`seeding with ${seedVia} (--api-seed: through the catalog's create operation)`);
    seed = await bulkSeedCatalog({ ...seedOptions, databaseUrl: stack.databaseUrl, js: ingest.js, orgId: stack.orgId });
  } else {
    seedVia = ingest ? "catalog RPC over NATS" : "HTTP API";
    log(`seeding through the ${seedVia}`);
    const write = ingest ? rpcCatalogWriter(ingest.nc, stack.orgId) : httpCatalogWriter(api);
    seed = await seedCatalog(write, { ...seedOptions, concurrency: profile.seedConcurrency });
  }
  await verifySeed(api, seed);
  setup.seed = { via: seedVia, locations: seed.locations.length, assets: seed.assets.length, zephyr_assets: seed.zephyrAssets, seconds: seed.seconds };

  const roles = assignRoles(seed, PROBE_ASSETS);
  const fleet = new FleetModel(roles.pool, seed.locations);
  // Observation times start three days back and advance 1 ms per event.
  const scans = new ScanFactory(stack.orgId, runId, new ScanClock(Date.now() - 3 * 24 * 3600 * 1000));
  const markers = new MarkerScans(roles.marker, [seed.locations[0]!, seed.locations[1] ?? seed.locations[0]!], scans);
  const scope = { watch, orgId: stack.orgId, markers };

  if (ingest) {
    const placement = await runIngest(scope, ingest, placementScans(fleet, scans), {
      timeoutMs: profile.completionTimeoutMs,
    });
    log(`placed ${placement.reads} pool assets at their first location (${Math.round(placement.readsPerSecond)} reads/s)`);
    setup.placement = { reads: placement.reads, seconds: (placement.visible.all - placement.startedAt) / 1000 };

    if (options.cases.includes("history")) {
      const [a, b] = [seed.locations[0]!, seed.locations[1] ?? seed.locations[0]!];
      const events = Array.from({ length: profile.historyRows }, (_, i) => scans.build(i % 2 ? b : a, [roles.history]));
      const history = await runIngest(scope, ingest, events, { timeoutMs: profile.completionTimeoutMs });
      const seconds = (history.visible.all - history.startedAt) / 1000;
      log(`seeded ${history.reads} history rows for asset ${roles.history.id} in ${seconds.toFixed(1)} s`);
      setup.history_seed = { asset_id: roles.history.id, rows: history.reads, seconds };
    }
  }

  const baselineStarted = await baselineStarting;
  const baselineUrl = typeof baselineStarted === "string" ? baselineStarted : undefined;
  const baselineError = baselineStarted instanceof Error ? baselineStarted.message : undefined;
  if (baselineError) log(`baseline server: ${baselineError}`);

  const ctx: BenchContext = {
    profile,
    runId,
    orgId: stack.orgId,
    api,
    load: o.load,
    log,
    seed,
    roles,
    fleet,
    scans,
    markers,
    ingest,
    watch,
    databaseUrl: stack.databaseUrl,
    baselineUrl,
    baselineError,
    loadStartedAt: Date.now(),
  };

  if (stack.processes) {
    const pids = new Map<string, number>();
    for (const [name, child] of stack.processes) if (child.pid) pids.set(name, child.pid);
    const rss = startRssSampler(pids);
    teardown.add("RSS sampler", async () => rss.stop());
    ctx.cpu = cpuMeter(pids);
    // Idle: the highest of three samples, a second after seeding settles and then, when the run
    // reports memory, every 2 s until every process is under the idle target or the profile's rest
    // is over. V8 gives a burst's memory back 10-80 s later (seen: tracking 133 MB for 70 s after
    // seeding, then 76), so a second after the seed measures the seed, not the service at rest.
    const idleNow = async () => {
      const idle: Record<string, number> = {};
      for (let i = 0; i < 3; i++) {
        const sample = await rss.sampleNow();
        for (const [name, mb] of Object.entries(sample.mb)) idle[name] = Math.max(idle[name] ?? 0, mb);
        await new Promise((r) => setTimeout(r, 250));
      }
      return idle;
    };
    await new Promise((r) => setTimeout(r, 1000));
    const restStarted = Date.now();
    const first = await idleNow();
    let idle = first;
    if (options.cases.includes("rss")) {
      const restUntil = restStarted + profile.idleSettleSeconds * 1000;
      while (Object.values(idle).some((mb) => mb >= IDLE_RSS_TARGET_MB) && Date.now() < restUntil) {
        await new Promise((r) => setTimeout(r, 2000));
        idle = await idleNow();
      }
      log(`idle RSS after ${((Date.now() - restStarted) / 1000).toFixed(0)} s at rest (MB): ${Object.entries(idle).map(([n, mb]) => `${n} ${Math.round(mb)} (${Math.round(first[n] ?? 0)} at first)`).join(", ")}`);
    }
    ctx.rssIdleAfterMs = Date.now() - restStarted;
    ctx.rssIdleFirst = first;
    ctx.rss = rss;
    ctx.rssIdle = idle;
  }
  ctx.loadStartedAt = Date.now();
  return { ctx, setup };
}
