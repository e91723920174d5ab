import { describe, expect, it } from "vitest";
import { retentionPauseMs } from "./history-retention.ts";

describe("retention pacing", () => {
  it("pauses after each batch so the pass stays busy at most the given percent of wall time", () => {
    expect(retentionPauseMs(10, 25)).toBe(30);
    expect(retentionPauseMs(10, 50)).toBe(10);
    expect(retentionPauseMs(12, 1)).toBe(1188);
    // busy / (busy + pause) is the duty cycle
    const busy = 7;
    expect(busy / (busy + retentionPauseMs(busy, 20))).toBeCloseTo(0.2, 2);
  });

  it("does not pause at 100 percent", () => {
    expect(retentionPauseMs(50, 100)).toBe(0);
  });
});
