/** The pure parts of `npm run chaos`: the expectation ledger and its comparisons, the RSS verdict, the command line. */
import { describe, expect, it } from "vitest";
import { UsageError } from "../scripts/bench/bench-options.ts";
import type { RssSample } from "../scripts/bench/rss-sampler.ts";
import { parseChaosOptions } from "../scripts/chaos/chaos-options.ts";
import { assetCohorts } from "../scripts/chaos/chaos-run.ts";
import { rssTrend, soakWindows } from "../scripts/chaos/rss-trend.ts";
import { compareDeadLetters, comparePositions, ScanLedger, type ShownPosition } from "../scripts/chaos/scan-ledger.ts";

const scan = (observedAt: string, location: number, ...assets: number[]) => ({ observedAt, location: { id: location }, assets: assets.map((id) => ({ id })) });

describe("ScanLedger", () => {
  it("counts every stored read and keeps each asset's newest scan, whatever order the acks come in", () => {
    const ledger = new ScanLedger();
    ledger.place(1, 10);
    ledger.place(3, 30);
    ledger.stored(scan("2026-01-01T00:00:00.002Z", 20, 1, 2));
    // Acked later, observed earlier: not the newest.
    ledger.stored(scan("2026-01-01T00:00:00.001Z", 10, 1));
    expect(ledger.scans).toBe(2);
    expect(ledger.reads).toBe(3);
    expect(Object.fromEntries(ledger.newestScans())).toEqual({
      1: { locationId: 20, observedAt: "2026-01-01T00:00:00.002Z" },
      2: { locationId: 20, observedAt: "2026-01-01T00:00:00.002Z" },
      // Placed and never scanned in the run: its location only.
      3: { locationId: 30 },
    });
  });

  it("counts poison by reason, in a stable order", () => {
    const ledger = new ScanLedger();
    ledger.poisoned("invalid_schema");
    ledger.poisoned("invalid_json");
    ledger.poisoned("invalid_schema");
    expect(Object.entries(ledger.poisonByReason())).toEqual([
      ["invalid_json", 1],
      ["invalid_schema", 2],
    ]);
  });
});

describe("comparePositions", () => {
  const expected = new Map([
    [1, { locationId: 20, observedAt: "2026-01-01T00:00:00.002Z" }],
    [2, { locationId: 30 }],
  ]);

  it("matches when every asset shows its newest scan's location (and, for the report, its time)", () => {
    const shown = new Map<number, ShownPosition>([
      [1, { locationId: 20, lastSeen: "2026-01-01T00:00:00.002000Z" }],
      [2, { locationId: 30, lastSeen: "2025-12-31T00:00:00Z" }],
      [99, { locationId: 1 }],
    ]);
    expect(comparePositions(expected, shown, true)).toEqual({ checked: 2, matching: 2, mismatches: [] });
  });

  it("names a wrong location, a wrong last-seen time and a missing asset", () => {
    const wrongPlace = comparePositions(expected, new Map([[1, { locationId: 10 }], [2, { locationId: 30 }]]), false);
    expect(wrongPlace.mismatches.map((m) => m.assetId)).toEqual([1]);

    const stale = comparePositions(
      expected,
      new Map([
        [1, { locationId: 20, lastSeen: "2026-01-01T00:00:00.001Z" }],
        [2, { locationId: 30, lastSeen: "2026-01-01T00:00:00Z" }],
      ]),
      true,
    );
    expect(stale.mismatches.map((m) => m.assetId)).toEqual([1]);

    const missing = comparePositions(expected, new Map([[1, { locationId: 20 }]]), false);
    expect(missing).toMatchObject({ checked: 2, matching: 1, mismatches: [{ assetId: 2, shown: null }] });
  });
});

describe("compareDeadLetters", () => {
  it("lists only the reasons whose counts differ, a reason never sent included", () => {
    expect(compareDeadLetters({ invalid_json: 2, unknown_location: 1 }, { invalid_json: 2, unknown_location: 1 })).toEqual([]);
    expect(compareDeadLetters({ invalid_json: 2, unknown_location: 1 }, { invalid_json: 3, processing_failed: 1 })).toEqual([
      { reason: "invalid_json", sent: 2, found: 3 },
      { reason: "processing_failed", sent: 0, found: 1 },
      { reason: "unknown_location", sent: 1, found: 0 },
    ]);
  });
});

describe("rssTrend", () => {
  const start = 1_000_000;
  const windows = soakWindows(start, 600);
  /** One sample a second for ten minutes, `mb(second)` per process. */
  const samples = (mb: Record<string, (second: number) => number>): RssSample[] =>
    Array.from({ length: 600 }, (_, s) => ({ at: start + s * 1000, mb: Object.fromEntries(Object.entries(mb).map(([name, f]) => [name, f(s)])) }));

  it("uses one-minute windows after a minute of warm-up, a fifth of a shorter run", () => {
    expect(windows).toEqual({ windowSeconds: 60, first: [start + 60_000, start + 120_000], last: [start + 540_000, start + 600_000] });
    expect(soakWindows(start, 60).windowSeconds).toBe(12);
  });

  it("is flat when the last minute's median is within 10% of the first's, whatever the warm-up and the spikes", () => {
    const [trend] = rssTrend(
      samples({ catalog: (s) => (s < 60 ? 50 : s % 97 === 0 ? 400 : 120 + (s % 7)) }),
      windows,
    );
    expect(trend).toMatchObject({ process: "catalog", flat: true, peakMb: 400 });
    expect(trend!.growthPct).toBeLessThan(10);
  });

  it("is not flat when memory keeps growing", () => {
    const trends = rssTrend(samples({ catalog: () => 120, tracking: (s) => 100 + s * 0.05 }), windows);
    expect(trends.map((t) => [t.process, t.flat])).toEqual([
      ["catalog", true],
      ["tracking", false],
    ]);
    expect(trends[1]!.growthPct).toBeGreaterThan(10);
  });

  it("is not flat for a process that left no samples in the last window", () => {
    const [trend] = rssTrend(
      samples({ reporting: () => 100 }).map((s) => (s.at >= start + 540_000 ? { at: s.at, mb: {} } : s)),
      windows,
    );
    expect(trend!.flat).toBe(false);
  });
});

describe("assetCohorts", () => {
  it("splits the pool into disjoint cohorts covering it, none too small to fill two scans", () => {
    const pool = Array.from({ length: 458 }, (_, i) => i);
    const cohorts = assetCohorts(pool, 11);
    expect(cohorts).toHaveLength(11);
    expect(cohorts.flat().sort((a, b) => a - b)).toEqual(pool);
    expect(Math.min(...cohorts.map((c) => c.length))).toBeGreaterThanOrEqual(20);
    // 31 faults over 458 assets would leave cohorts of 14: fewer, larger ones instead.
    expect(assetCohorts(pool, 32)).toHaveLength(22);
    expect(assetCohorts(pool.slice(0, 5), 3)).toEqual([pool.slice(0, 5)]);
  });
});

describe("parseChaosOptions", () => {
  it("runs the chaos by default and the soak with --soak, ten minutes unless told", () => {
    expect(parseChaosOptions([]).mode).toBe("chaos");
    const soak = parseChaosOptions(["--soak"]);
    expect(soak.mode).toBe("soak");
    expect(soak.bench.soakSeconds).toBe(600);
    expect(parseChaosOptions(["--soak", "--minutes", "1"]).bench).toMatchObject({ soakSeconds: 60, soakWindowSeconds: 12 });
    expect(parseChaosOptions(["--rounds", "3"]).chaos.rounds).toBe(3);
  });

  it("refuses what it cannot honour", () => {
    expect(() => parseChaosOptions(["--minutes", "1"])).toThrow(UsageError);
    expect(() => parseChaosOptions(["--soak", "--minutes", "zero"])).toThrow(/positive number/);
    expect(() => parseChaosOptions(["--fast"])).toThrow(UsageError);
  });
});
