/**
 * The command line and environment of `npm run bench`, and the two profiles
 * (full: under 15 minutes on 2 cores; --quick: under 2 minutes) that size
 * the seed data and the length of every case.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

export const CASE_NAMES = [
  "baseline",
  "get-asset",
  "list-assets",
  "search-assets",
  "create-asset",
  "ingest-steady",
  "ingest-churn",
  "ingest-smoothing",
  "visibility",
  "read-under-ingest",
  "webhooks",
  "report",
  "history",
  "soak",
  "bulk-import",
  "history-bytes",
  // After history-bytes: the old rows it seeds and retention deletes would count in the table's size.
  "ingest-retention",
  "rss",
] as const;
export type CaseName = (typeof CASE_NAMES)[number];

export interface BenchProfile {
  name: "full" | "quick" | "chaos" | "soak";
  locations: number;
  assets: number;
  /** One asset in this many has "zephyr" in its name. */
  zephyrEvery: number;
  /** History rows of the one asset the `history` case reads. */
  historyRows: number;
  /** Concurrent API calls while seeding. */
  seedConcurrency: number;
  /** Closed-loop API cases: measured seconds, after warm-up seconds. */
  apiSeconds: number;
  warmupSeconds: number;
  /** Connections of the throughput cases. */
  connections: number;
  /** Connections of the latency cases (report, history). */
  latencyConnections: number;
  /** Ingest cases publish target rate x this many seconds of reads, paced at the target rate. */
  ingestSeconds: number;
  /**
   * The same for the steady and churn mixes, whose targets say "sustained": at 50,000 reads/s, 10 s is the
   * 50,000-event backlog the issue's own measurement drained. A 3 s burst was a few batches, so the pipeline's
   * filling and draining (a batch in tracking, then in reporting) weighed on its rate, and large batches, which
   * only a backlog brings, never formed.
   */
  sustainedIngestSeconds: number;
  visibilitySeconds: number;
  visibilityReadsPerSecond: number;
  /** Probe events per second among the visibility load. */
  visibilityProbesPerSecond: number;
  underIngestSeconds: number;
  underIngestReadsPerSecond: number;
  underIngestApiPerSecond: number;
  soakSeconds: number;
  soakWindowSeconds: number;
  soakApiPerSecond: number;
  soakReadsPerSecond: number;
  /** Rows of the bulk-import case's CSV (one tag each). */
  bulkRows: number;
  /** How long ingest effects may take to show before a case fails. */
  completionTimeoutMs: number;
  /**
   * Idle memory: how long the stack may rest after seeding for every process to come under
   * the idle target (V8 gives memory back 10-80 s after a burst, not at once).
   */
  idleSettleSeconds: number;
}

export const FULL_PROFILE: BenchProfile = {
  name: "full",
  locations: 1000,
  assets: 20_000,
  zephyrEvery: 100,
  historyRows: 100_000,
  seedConcurrency: 32,
  apiSeconds: 15,
  warmupSeconds: 3,
  connections: 32,
  latencyConnections: 4,
  ingestSeconds: 3,
  sustainedIngestSeconds: 10,
  visibilitySeconds: 20,
  visibilityReadsPerSecond: 5000,
  visibilityProbesPerSecond: 10,
  underIngestSeconds: 10,
  underIngestReadsPerSecond: 20_000,
  underIngestApiPerSecond: 200,
  soakSeconds: 600,
  soakWindowSeconds: 60,
  soakApiPerSecond: 200,
  soakReadsPerSecond: 5000,
  bulkRows: 100_000,
  completionTimeoutMs: 180_000,
  idleSettleSeconds: 120,
};

export const QUICK_PROFILE: BenchProfile = {
  name: "quick",
  locations: 100,
  assets: 2000,
  zephyrEvery: 100,
  historyRows: 5000,
  seedConcurrency: 32,
  apiSeconds: 3,
  warmupSeconds: 1,
  connections: 32,
  latencyConnections: 4,
  ingestSeconds: 0.5,
  sustainedIngestSeconds: 0.5,
  visibilitySeconds: 5,
  visibilityReadsPerSecond: 5000,
  visibilityProbesPerSecond: 10,
  underIngestSeconds: 2,
  underIngestReadsPerSecond: 20_000,
  underIngestApiPerSecond: 100,
  soakSeconds: 60,
  soakWindowSeconds: 10,
  soakApiPerSecond: 200,
  soakReadsPerSecond: 5000,
  bulkRows: 20_000,
  completionTimeoutMs: 60_000,
  idleSettleSeconds: 20,
};

/** An existing stack to measure instead of starting one (BASE_URL mode). */
export interface ExternalStack {
  baseUrl: string;
  apiKey: string;
  /** For the ingest cases; without it they are skipped. */
  natsUrl?: string;
  /** The stack's database: enables the baseline and history-bytes. */
  databaseUrl?: string;
}

export interface BenchOptions {
  profile: BenchProfile;
  cases: CaseName[];
  keep: boolean;
  /** Seed through the catalog's create operation even where bulk seeding is possible. */
  apiSeed: boolean;
  jsonFile?: string;
  external?: ExternalStack;
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export const USAGE = `usage: npm run bench -- [--quick] [--only <case,...>] [--soak] [--keep] [--json <file>] [--api-seed]
cases: ${CASE_NAMES.join(", ")} (soak runs only with --soak)
env: BASE_URL + BENCH_API_KEY to measure a running stack (NATS_URL for the ingest cases,
     BASELINE_DATABASE_URL, the stack's database, for the baseline and history-bytes)`;

/**
 * Flags only (no positionals), strictly: an unknown flag or a missing value
 * is a UsageError carrying `usage`, and so is `--help` (add it to `options`).
 * Shared by `npm run bench` and `npm run chaos`.
 */
export function parseFlags<O extends NonNullable<ParseArgsConfig["options"]>>(argv: string[], options: O, usage: string) {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, strict: true, allowPositionals: false, options }));
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`);
  }
  if ("help" in values && values.help) throw new UsageError(usage);
  return values;
}

export function parseBenchOptions(argv: string[], env: Record<string, string | undefined>): BenchOptions {
  const values = parseFlags(
    argv,
    {
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      soak: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      "api-seed": { type: "boolean", default: false },
      json: { type: "string" },
      help: { type: "boolean", default: false },
    },
    USAGE,
  );
  let cases: CaseName[] = CASE_NAMES.filter((c) => c !== "soak" || values.soak);
  if (values.only !== undefined) {
    const wanted = values.only.split(",").map((s) => s.trim()).filter(Boolean);
    const unknown = wanted.filter((w) => !(CASE_NAMES as readonly string[]).includes(w));
    if (unknown.length || wanted.length === 0) throw new UsageError(`unknown case(s): ${unknown.join(", ") || "(none)"}\n${USAGE}`);
    if (values.soak && !wanted.includes("soak")) wanted.push("soak");
    cases = CASE_NAMES.filter((c) => wanted.includes(c));
  }
  let external: ExternalStack | undefined;
  if (env.BASE_URL) {
    if (!env.BENCH_API_KEY) throw new UsageError("BASE_URL needs BENCH_API_KEY (an all-scopes key of the organization to measure)");
    external = {
      baseUrl: env.BASE_URL.replace(/\/+$/, ""),
      apiKey: env.BENCH_API_KEY,
      natsUrl: env.NATS_URL || undefined,
      databaseUrl: env.BASELINE_DATABASE_URL || undefined,
    };
  }
  return {
    profile: values.quick ? QUICK_PROFILE : FULL_PROFILE,
    cases,
    keep: values.keep,
    apiSeed: values["api-seed"],
    jsonFile: values.json,
    external,
  };
}
