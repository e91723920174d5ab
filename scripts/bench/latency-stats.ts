/**
 * Pure statistics of the benchmark: nearest-rank percentiles over latency
 * samples and rates over an elapsed time. No I/O, so tests cover them
 * (tests/bench-stats.test.ts) and the load runner, the ingest cases and the
 * legacy bench scripts all compute figures the same way.
 */

export interface LatencySummary {
  /** Samples the summary is over. */
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * Nearest-rank percentile of ascending `sorted` samples: the smallest sample
 * such that at least p% of the samples are at or below it. NaN when empty.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  if (p <= 0) return sorted[0]!;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/** Summarizes latencies (ms) in any order; the input is not modified. */
export function summarizeLatencies(samples: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

/** Events per second over `elapsedMs`; 0 when no time passed. */
export function ratePerSecond(count: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (count * 1000) / elapsedMs : 0;
}

/** Counts of HTTP statuses by code, and how many were not 2xx. */
export function countNon2xx(statusCodes: Readonly<Record<string, number>>): number {
  let n = 0;
  for (const [code, count] of Object.entries(statusCodes)) if (!code.startsWith("2")) n += count;
  return n;
}
