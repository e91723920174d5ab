/**
 * `rss`: resident memory of each service process, idle (after seeding,
 * before the first case) and the peak sampled every 500 ms while the cases
 * ran. One row per process.
 */
import { below, skippedRow } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";

const target = { text: "idle < 150 MB, load < 250 MB", criteria: [below("idle_mb", 150), below("peak_mb", 250)] };

export const rssCase: BenchCase = {
  name: "rss",
  target,
  async run(ctx) {
    if (!ctx.rss || !ctx.rssIdle) return [skippedRow("rss", target, "only for a stack the benchmark started")];
    await ctx.rss.sampleNow();
    const peaks = ctx.rss.peak(ctx.loadStartedAt);
    return Object.entries(ctx.rssIdle).map(([name, idle]) => {
      const peak = Math.max(peaks[name] ?? 0, idle);
      return {
        name: `rss ${name}`,
        status: "ok" as const,
        summary: `idle ${Math.round(idle)} MB, peak ${Math.round(peak)} MB`,
        metrics: { idle_mb: idle, peak_mb: peak },
        non2xx: 0,
        errors: 0,
        target,
        details: { idle_mb: Math.round(idle * 10) / 10, peak_mb: Math.round(peak * 10) / 10, samples: ctx.rss!.samples.length },
      };
    });
  },
};
