/**
 * Is memory flat over the soak? Per process, the median RSS of the first
 * window after warm-up against the median of the last window: growth under
 * the limit (10%) is flat. Medians, not peaks: a garbage collection that
 * lands in one window must not decide the verdict. Windows are a minute,
 * or a fifth of a shorter run (`--minutes 1`: 12 s), the first of them
 * warm-up (JIT, pools and caches filling). Pure; tests/chaos-ledger.test.ts
 * covers it.
 */
import { percentile } from "../bench/latency-stats.ts";
import type { RssSample } from "../bench/rss-sampler.ts";

export const RSS_GROWTH_LIMIT_PCT = 10;

export interface SoakWindows {
  windowSeconds: number;
  /** [from, to) in ms since the epoch. */
  first: [number, number];
  last: [number, number];
}

export function soakWindows(startedAt: number, seconds: number): SoakWindows {
  const windowSeconds = Math.min(60, seconds / 5);
  const w = windowSeconds * 1000;
  const end = startedAt + seconds * 1000;
  return { windowSeconds, first: [startedAt + w, startedAt + 2 * w], last: [end - w, end] };
}

export interface RssTrend {
  process: string;
  firstMb: number;
  lastMb: number;
  growthPct: number;
  peakMb: number;
  samples: number;
  flat: boolean;
}

const median = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50);

export function rssTrend(samples: readonly RssSample[], windows: SoakWindows, limitPct = RSS_GROWTH_LIMIT_PCT): RssTrend[] {
  const inside = ([from, to]: [number, number]) => samples.filter((s) => s.at >= from && s.at < to);
  const first = inside(windows.first);
  const last = inside(windows.last);
  const all = samples.filter((s) => s.at >= windows.first[0] && s.at < windows.last[1]);
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.mb)))].sort();
  return names.map((name) => {
    const of = (list: readonly RssSample[]) => list.flatMap((s) => (s.mb[name] === undefined ? [] : [s.mb[name]!]));
    const firstMb = median(of(first));
    const lastMb = median(of(last));
    const growthPct = ((lastMb - firstMb) / firstMb) * 100;
    return {
      process: name,
      firstMb,
      lastMb,
      growthPct,
      peakMb: Math.max(...of(all)),
      samples: of(all).length,
      // NaN (a window without samples: the process was gone) is not flat.
      flat: growthPct < limitPct,
    };
  });
}
