import { describe, expect, it } from "vitest";
import { phaseTimer } from "./phase-timer.ts";

describe("phaseTimer", () => {
  it("records each phase's time since the previous lap, and the total", () => {
    let now = 100;
    const clock = performance.now;
    performance.now = () => now;
    try {
      const { timings, lap, totalMs } = phaseTimer();
      now = 112.34;
      lap("parse_ms");
      now = 130;
      lap("commit_ms");
      expect(timings).toEqual({ parse_ms: 12.3, commit_ms: 17.7 });
      expect(totalMs()).toBe(30);
    } finally {
      performance.now = clock;
    }
  });
});
