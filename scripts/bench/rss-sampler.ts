/**
 * Resident memory of each service process: VmRSS from /proc/<pid>/status
 * every 500 ms for the whole run, so the `rss` case can report idle memory
 * (after seeding, before load) and the peak under load, and the soak its
 * per-window peaks.
 */
import { readFile } from "node:fs/promises";

export interface RssSample {
  at: number;
  /** MiB by process name; absent when the process could not be read. */
  mb: Record<string, number>;
}

export interface RssSampler {
  /** Samples now (outside the timer) and returns it. */
  sampleNow(): Promise<RssSample>;
  /** Highest MiB per process over [from, to]. */
  peak(from: number, to?: number): Record<string, number>;
  stop(): void;
  readonly samples: readonly RssSample[];
}

export async function readRssMb(pid: number): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

export function startRssSampler(pids: ReadonlyMap<string, number>, intervalMs = 500): RssSampler {
  const samples: RssSample[] = [];
  const sampleNow = async () => {
    const mb: Record<string, number> = {};
    for (const [name, pid] of pids) {
      const value = await readRssMb(pid);
      if (value !== undefined) mb[name] = value;
    }
    const sample = { at: Date.now(), mb };
    samples.push(sample);
    return sample;
  };
  const timer = setInterval(() => void sampleNow(), intervalMs);
  timer.unref();
  return {
    samples,
    sampleNow,
    peak(from, to = Number.POSITIVE_INFINITY) {
      const out: Record<string, number> = {};
      for (const s of samples) {
        if (s.at < from || s.at > to) continue;
        for (const [name, mb] of Object.entries(s.mb)) out[name] = Math.max(out[name] ?? 0, mb);
      }
      return out;
    },
    stop: () => clearInterval(timer),
  };
}
