import { describe, expect, it } from "vitest";
import { flushBarrier } from "./consistency.ts";

/** A flush the test completes by hand; `started` counts them. */
function manualFlush() {
  const pending: Array<() => void> = [];
  return {
    flush: () => new Promise<void>((resolve) => pending.push(resolve)),
    get started() {
      return pending.length;
    },
    complete: (i: number) => pending[i]!(),
  };
}

const settledYet = async (p: Promise<void>) => {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

describe("flushBarrier", () => {
  it("resolves after a flush that started after the call", async () => {
    const f = manualFlush();
    const barrier = flushBarrier(f.flush);
    const first = barrier();
    expect(f.started).toBe(1);
    expect(await settledYet(first)).toBe(false);
    f.complete(0);
    expect(await settledYet(first)).toBe(true);
  });

  it("a call during a flush waits for the next one, shared by every call meanwhile", async () => {
    const f = manualFlush();
    const barrier = flushBarrier(f.flush);
    const early = barrier();
    const late = [barrier(), barrier(), barrier()];
    expect(f.started).toBe(1);
    f.complete(0);
    expect(await settledYet(early)).toBe(true);
    // The flush under way may have been sent before what the late calls must see.
    expect(await settledYet(late[0]!)).toBe(false);
    expect(f.started).toBe(2);
    f.complete(1);
    for (const p of late) expect(await settledYet(p)).toBe(true);
    expect(f.started).toBe(2);
  });

  it("a failed flush still lets the next calls through on a new one", async () => {
    let n = 0;
    const barrier = flushBarrier(() => (++n === 1 ? Promise.reject(new Error("closed")) : Promise.resolve()));
    await expect(barrier()).rejects.toThrow("closed");
    await expect(barrier()).resolves.toBeUndefined();
    expect(n).toBe(2);
  });
});
