import { describe, expect, it } from "vitest";
import { latch } from "@whereabouts/shared/testing";
import { createCountCache, type CountResult } from "./count-cache.ts";

function counter(results: CountResult[]) {
  let calls = 0;
  return {
    calls: () => calls,
    compute: async () => results[Math.min(calls++, results.length - 1)]!,
  };
}

describe("count cache", () => {
  it("serves a count while no newer catalog write is known, recounts at a newer watermark", async () => {
    const cache = createCountCache(() => 0);
    const c = counter([{ total: 5, secondsValid: null }, { total: 6, secondsValid: null }]);
    expect((await cache.count("k", 10, c.compute)).total).toBe(5);
    expect((await cache.count("k", 10, c.compute)).total).toBe(5);
    expect((await cache.count("k", 9, c.compute)).total).toBe(5);
    expect(c.calls()).toBe(1);
    expect((await cache.count("k", 11, c.compute)).total).toBe(6);
    expect(c.calls()).toBe(2);
  });

  it("expires at the next validity boundary the count reported", async () => {
    let t = 1_000;
    const cache = createCountCache(() => t);
    const c = counter([{ total: 5, secondsValid: 2.5 }, { total: 7, secondsValid: null }]);
    expect((await cache.count("k", 1, c.compute)).total).toBe(5);
    t += 2_499;
    expect((await cache.count("k", 1, c.compute)).total).toBe(5);
    t += 1;
    expect((await cache.count("k", 1, c.compute)).total).toBe(7);
    expect(c.calls()).toBe(2);
  });

  it("caches nothing for a caller without a watermark, and keys apart", async () => {
    const cache = createCountCache(() => 0);
    const c = counter([{ total: 1, secondsValid: null }, { total: 2, secondsValid: null }, { total: 3, secondsValid: null }]);
    expect((await cache.count("k", undefined, c.compute)).total).toBe(1);
    expect((await cache.count("k", undefined, c.compute)).total).toBe(2);
    expect((await cache.count("other", 1, c.compute)).total).toBe(3);
    expect(c.calls()).toBe(3);
  });
});

describe("count cache under concurrent reads", () => {
  it("counts once for the reads that arrive while a count is under way, unless they need a newer watermark", async () => {
    const cache = createCountCache(() => 0);
    const gate = latch();
    let calls = 0;
    const compute = async (): Promise<CountResult> => {
      const n = ++calls;
      await gate.opened;
      return { total: n * 10, secondsValid: null };
    };
    const reads = [cache.count("k", 5, compute), cache.count("k", 4, compute), cache.count("k", 5, compute), cache.count("k", 6, compute)];
    gate.open();
    expect((await Promise.all(reads)).map((r) => r.total)).toEqual([10, 10, 10, 20]);
    expect(calls).toBe(2);
    // The newer watermark's count is the one kept.
    expect((await cache.count("k", 6, compute)).total).toBe(20);
    expect(calls).toBe(2);
  });

  it("does not hand a read a shared count that expired while it waited", async () => {
    let t = 0;
    const cache = createCountCache(() => t);
    const gate = latch();
    let calls = 0;
    const compute = async (): Promise<CountResult> => {
      const n = ++calls;
      if (n === 1) await gate.opened;
      // A row's window opens 0.1 s after the first count began.
      return { total: n, secondsValid: n === 1 ? 0.1 : null };
    };
    const first = cache.count("k", 1, compute);
    const joined = cache.count("k", 1, compute);
    t = 150;
    gate.open();
    expect((await first).total).toBe(1);
    expect((await joined).total).toBe(2);
    expect(calls).toBe(2);
  });
});
