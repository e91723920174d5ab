/**
 * `rss`: resident memory of each service process, idle (after seeding, once
 * the stack has rested: see bench-setup.ts) and the peak sampled every 500 ms
 * while the cases ran. One row per process.
 */
import { below, skippedRow } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";

/** MB: the idle target (bench-setup.ts rests the stack until every process is under it, or the profile's time is up). */
export const IDLE_RSS_TARGET_MB = 150;
const target = { text: "idle < 150 MB, load < 250 MB", criteria: [below("idle_mb", IDLE_RSS_TARGET_MB), below("peak_mb", 250)] };

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
        summary: `idle ${Math.round(idle)} MB (after ${Math.round(ctx.rssIdleAfterMs! / 1000)} s at rest), peak ${Math.round(peak)} MB`,
        metrics: { idle_mb: idle, peak_mb: peak },
        non2xx: 0,
        errors: 0,
        target,
        details: {
          idle_mb: Math.round(idle * 10) / 10,
          idle_after_ms: ctx.rssIdleAfterMs,
          idle_at_first_mb: Math.round((ctx.rssIdleFirst?.[name] ?? Number.NaN) * 10) / 10,
          peak_mb: Math.round(peak * 10) / 10,
          samples: ctx.rss!.samples.length,
        },
      };
    });
  },
};
