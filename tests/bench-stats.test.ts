/** The benchmark's pure helpers: percentiles, summaries, the verdict and the results table. */
import { describe, expect, it } from "vitest";
import { atLeast, below, judge, type CaseRow } from "../scripts/bench/bench-case.ts";
import { countNon2xx, percentile, ratePerSecond, summarizeLatencies } from "../scripts/bench/latency-stats.ts";
import { formatMs, formatResultsTable, formatTable } from "../scripts/bench/results-table.ts";

const row = (over: Partial<CaseRow>): CaseRow => ({
  name: "get-asset",
  status: "ok",
  metrics: {},
  non2xx: 0,
  errors: 0,
  target: { text: "≥100 req/s, p99 < 25 ms", criteria: [atLeast("rate", 100), below("p99", 25)] },
  details: {},
  ...over,
});

describe("percentile (nearest rank)", () => {
  const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
  it("picks the smallest sample with p% at or below it", () => {
    expect(percentile(sorted, 50)).toBe(50);
    expect(percentile(sorted, 95)).toBe(95);
    expect(percentile(sorted, 99)).toBe(99);
    expect(percentile(sorted, 100)).toBe(100);
    expect(percentile(sorted, 0)).toBe(1);
  });
  it("handles tiny and empty inputs", () => {
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([1, 2], 50)).toBe(1);
    expect(percentile([], 50)).toBeNaN();
  });
});

describe("summarizeLatencies", () => {
  it("sorts a copy and reports count, percentiles, max and mean", () => {
    const samples = [5, 1, 4, 2, 3];
    expect(summarizeLatencies(samples)).toEqual({ count: 5, p50: 3, p95: 5, p99: 5, max: 5, mean: 3 });
    expect(samples).toEqual([5, 1, 4, 2, 3]);
  });
  it("is NaN throughout when there are no samples", () => {
    const s = summarizeLatencies([]);
    expect(s.count).toBe(0);
    expect(s.p99).toBeNaN();
  });
});

it("rates and non-2xx counts", () => {
  expect(ratePerSecond(500, 250)).toBe(2000);
  expect(ratePerSecond(5, 0)).toBe(0);
  expect(countNon2xx({ 200: 10, 201: 2, 404: 1, 503: 3 })).toBe(4);
});

describe("judge", () => {
  const latency = { count: 10, p50: 5, p95: 9, p99: 10, max: 12, mean: 6 };
  it("meets a target only when every criterion holds and nothing failed", () => {
    expect(judge(row({ rate: { value: 150, unit: "req/s" }, latency }))).toBe(true);
    expect(judge(row({ rate: { value: 50, unit: "req/s" }, latency }))).toBe(false);
    expect(judge(row({ rate: { value: 150, unit: "req/s" }, latency, non2xx: 1 }))).toBe(false);
    expect(judge(row({ status: "failed" }))).toBe(false);
  });
  it("cannot judge a missing figure or a skipped case", () => {
    expect(judge(row({ rate: { value: 150, unit: "req/s" } }))).toBeUndefined();
    expect(judge(row({ status: "skipped" }))).toBeUndefined();
  });
});

describe("table formatting", () => {
  it("pads columns to the widest cell", () => {
    expect(formatTable(["a", "bb"], [["xxx", "y"]])).toBe("a    bb\n---  --\nxxx  y");
  });
  it("formats milliseconds by magnitude", () => {
    expect(formatMs(1.234)).toBe("1.23 ms");
    expect(formatMs(12.34)).toBe("12.3 ms");
    expect(formatMs(1234.5)).toBe("1,235 ms");
    expect(formatMs(Number.NaN)).toBe("-");
  });
  it("renders one line per row with rate, latencies, failures, ratio and verdict", () => {
    const r = row({ rate: { value: 812.4, unit: "req/s" }, latency: { count: 1, p50: 20, p95: 30, p99: 40, max: 50, mean: 25 }, ratio: 0.25 });
    r.met = judge(r);
    const lines = formatResultsTable([r, row({ name: "rss", status: "skipped", note: "n/a here" })]).split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^case\s+rate \/ value\s+p50\s+p95\s+p99\s+non-2xx \/ errors\s+x baseline\s+target\s+met$/);
    expect(lines[2]).toMatch(/^get-asset\s+812 req\/s\s+20\.0 ms\s+30\.0 ms\s+40\.0 ms\s+0 \/ 0\s+0\.25x\s+≥100 req\/s, p99 < 25 ms\s+no$/);
    expect(lines[3]).toMatch(/^rss\s+n\/a here\s+-.*skipped$/);
  });
});
