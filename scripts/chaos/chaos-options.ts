/**
 * The command line of `npm run chaos`, and the sizes of its two runs: the
 * chaos run (a small fleet, 500 reads/s, each fault once) and the soak
 * (`--soak`: 10 minutes by default of ~150 API req/s and 2,000 reads/s).
 */
import { parseFlags, QUICK_PROFILE, UsageError, type BenchProfile } from "../bench/bench-options.ts";
import type { ChaosProfile } from "./chaos-run.ts";

export const USAGE = `usage: npm run chaos -- [--soak] [--minutes <n>] [--rounds <n>] [--json <file>]
  (no flag)     publish scans while SIGKILLing tracking, reporting and catalog and restarting
                the broker, then check nothing was lost, duplicated or misplaced
  --rounds n    go through the faults n times (default 1)
  --soak        instead, a mixed-load soak that samples every service's RSS
  --minutes n   the soak's length (default 10)
  --json file   where the results go (default bench-results/chaos-<time>.json or soak-<time>.json)`;

export interface ChaosOptions {
  mode: "chaos" | "soak";
  /** Seeding, seeding's timeouts and (for the soak) its load. */
  bench: BenchProfile;
  chaos: ChaosProfile;
  jsonFile?: string;
}

const positive = (name: string, text: string | undefined, fallback: number) => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} takes a positive number, not "${text}"\n${USAGE}`);
  return n;
};

export function parseChaosOptions(argv: string[]): ChaosOptions {
  const values = parseFlags(
    argv,
    {
      soak: { type: "boolean", default: false },
      minutes: { type: "string" },
      rounds: { type: "string" },
      json: { type: "string" },
      help: { type: "boolean", default: false },
    },
    USAGE,
  );
  if (!values.soak && values.minutes !== undefined) throw new UsageError(`--minutes goes with --soak\n${USAGE}`);
  const soakSeconds = Math.round(positive("minutes", values.minutes, 10) * 60);
  const bench: BenchProfile = values.soak
    ? {
        ...QUICK_PROFILE,
        name: "soak",
        soakSeconds,
        soakWindowSeconds: Math.min(60, soakSeconds / 5),
        soakApiPerSecond: 150,
        soakReadsPerSecond: 2000,
        completionTimeoutMs: 180_000,
      }
    : { ...QUICK_PROFILE, name: "chaos", locations: 25, assets: 500, completionTimeoutMs: 180_000 };
  return {
    mode: values.soak ? "soak" : "chaos",
    bench,
    chaos: {
      readsPerSecond: 500,
      rounds: Math.round(positive("rounds", values.rounds, 1)),
      calmMs: 8000,
      processDownMs: 3000,
      brokerDownMs: 5000,
      poisonEvery: 50,
      exactDuplicates: 500,
      alteredDuplicates: 50,
      publishDeadlineMs: 60_000,
      settleTimeoutMs: 240_000,
    },
    jsonFile: values.json,
  };
}
