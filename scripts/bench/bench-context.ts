/**
 * What every case gets: the profile, the API and load generator, the seed
 * data and the roles of its assets, the scan model, and (where the stack
 * allows) NATS, the database and the RSS sampler. A case finds here whether
 * it can run at all; it skips with the reason when it cannot.
 */
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@whereabouts/shared";
import type { ApiClient } from "./api-client.ts";
import type { CaseName, BenchProfile } from "./bench-options.ts";
import type { CaseRow, Target } from "./bench-case.ts";
import type { CatalogSeed } from "./catalog-seed.ts";
import type { CompletionWatch } from "./ingest-completion.ts";
import type { LoadGenerator } from "./load-generator.ts";
import type { LoadReport } from "./load-runner.ts";
import type { RequestPlan } from "./request-plans.ts";
import type { CpuMeter } from "./cpu-meter.ts";
import type { RssSampler } from "./rss-sampler.ts";
import type { AssetRoles, FleetModel, MarkerScans, ScanFactory } from "./scan-workload.ts";

export interface IngestAccess {
  nc: NatsConnection;
  js: JetStreamClient;
}

export interface BenchContext {
  profile: BenchProfile;
  runId: string;
  orgId: number;
  api: ApiClient;
  load: LoadGenerator;
  log: (message: string) => void;
  seed: CatalogSeed;
  roles: AssetRoles;
  fleet: FleetModel;
  scans: ScanFactory;
  /** The end-of-run marker events the ingest cases finish with. */
  markers: MarkerScans;
  /** Absent when no NATS is reachable (BASE_URL without NATS_URL). */
  ingest?: IngestAccess;
  watch: CompletionWatch;
  /** The stack's database: absent against a BASE_URL without BASELINE_DATABASE_URL. */
  databaseUrl?: string;
  /** The baseline server, when one runs, or why it does not. */
  baselineUrl?: string;
  baselineError?: string;
  /** Service processes' memory, when the benchmark started them. */
  rss?: RssSampler;
  /** The stack's CPU time (services, Postgres, nats-server), when the benchmark started it. */
  cpu?: CpuMeter;
  rssIdle?: Record<string, number>;
  /** How long the stack rested before rssIdle was taken, and RSS a second after seeding (the start of that rest). */
  rssIdleAfterMs?: number;
  rssIdleFirst?: Record<string, number>;
  /** When the first case started (the start of "under load" for RSS). */
  loadStartedAt: number;
}

export interface BenchCase {
  name: CaseName;
  target: Target;
  run(ctx: BenchContext): Promise<CaseRow[]>;
}

/** A row from a load run: its rate, latencies, statuses and errors, all of them. */
export function rowFromLoad(name: string, target: Target, report: LoadReport, extra: Partial<CaseRow> = {}): CaseRow {
  return {
    name,
    status: "ok",
    rate: { value: report.rate, unit: "req/s" },
    latency: report.latency,
    metrics: {},
    non2xx: report.non2xx,
    errors: report.errors,
    target,
    ...extra,
    details: {
      responses: report.responses,
      elapsed_ms: Math.round(report.elapsedMs),
      status_codes: report.statusCodes,
      timeouts: report.timeouts,
      error_samples: report.errorSamples,
      ...(report.scheduled === undefined ? {} : { scheduled: report.scheduled, max_start_lag_ms: report.maxStartLagMs }),
      ...extra.details,
    },
  };
}

/**
 * A closed-loop API case: `plan` sent over the profile's connections for its
 * seconds (after its warm-up), one row compared with the baseline.
 */
export function closedLoopCase(
  name: CaseName,
  target: Target,
  plan: (ctx: BenchContext) => RequestPlan,
  details: (ctx: BenchContext) => Record<string, unknown> = () => ({}),
): BenchCase {
  return {
    name,
    target,
    async run(ctx) {
      const report = await ctx.load.run({
        mode: "closed",
        baseUrl: ctx.api.baseUrl,
        apiKey: ctx.api.apiKey,
        plan: plan(ctx),
        connections: ctx.profile.connections,
        seconds: ctx.profile.apiSeconds,
        warmupSeconds: ctx.profile.warmupSeconds,
      });
      return [rowFromLoad(name, target, report, { comparesToBaseline: true, details: { connections: ctx.profile.connections, ...details(ctx) } })];
    },
  };
}
