/**
 * The soak: the benchmark's `soak` case (open-loop mixed API traffic, GET by
 * id / list / PATCH / tag attach, while scans are offered at a steady rate,
 * per-window figures logged) at a moderate load for `--minutes`, with the
 * RSS of every service process sampled every 500 ms throughout; then the
 * memory verdict of rss-trend.ts.
 */
import type { CaseRow } from "../bench/bench-case.ts";
import type { BenchContext } from "../bench/bench-context.ts";
import { soakCase } from "../bench/cases/soak-case.ts";
import { rssTrend, soakWindows, type RssTrend, type SoakWindows } from "./rss-trend.ts";

export interface SoakResult {
  row: CaseRow;
  windows: SoakWindows;
  trends: RssTrend[];
  status5xx: number;
}

export async function runSoak(ctx: BenchContext): Promise<SoakResult> {
  if (!ctx.rss) throw new Error("the soak needs the private stack's processes to sample");
  const startedAt = Date.now();
  const windows = soakWindows(startedAt, ctx.profile.soakSeconds);
  const [row] = await soakCase.run(ctx);
  if (!row) throw new Error("the soak case returned no row");
  const trends = rssTrend(ctx.rss.samples, windows);
  return { row, windows, trends, status5xx: row.metrics.status_5xx ?? 0 };
}
