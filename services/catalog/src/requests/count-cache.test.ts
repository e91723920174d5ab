import { describe, expect, it } from "vitest";
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
