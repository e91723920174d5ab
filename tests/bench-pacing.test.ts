/**
 * The benchmark's pacer (scripts/bench/scan-publisher.ts): what it offers is
 * counted from the clock, not from its 20 ms ticks, so a tick that overruns
 * (a publish whose ack takes longer than a tick, a busy event loop) does not
 * lower the offered rate. Driven with fake timers; a send moves the clock on
 * by `ackMs` before it resolves, as a slow ack would.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { paced } from "../scripts/bench/scan-publisher.ts";

afterEach(() => {
  vi.useRealTimers();
});

/** Runs `paced` on a fake clock; each send takes `ackMs` of it. Resolves with what it sent and when. */
async function runWithAcks(perSecond: number, seconds: number, ackMs: number, stop?: (sent: number) => boolean) {
  vi.useFakeTimers();
  const start = Date.now();
  const sentAt: number[] = [];
  let done = false;
  const run = paced(
    perSecond,
    seconds,
    async () => {
      sentAt.push(Date.now() - start);
      vi.setSystemTime(Date.now() + ackMs);
    },
    stop && (() => stop(sentAt.length)),
  ).finally(() => (done = true));
  while (!done) await vi.advanceTimersByTimeAsync(1);
  return { sent: await run, sentAt };
}

describe("paced", () => {
  it("offers the whole rate when a send overruns its tick", async () => {
    // One send every 100 ms, each taking 25 ms: counted by ticks, every send would cost a tick's worth.
    const { sent, sentAt } = await runWithAcks(10, 2, 25);
    expect(sent).toBe(20);
    // Spread over the window, not sent at once.
    expect(sentAt.filter((t) => t < 1000).length).toBe(10);
  });

  it("offers the window's worth and no more", async () => {
    const { sent } = await runWithAcks(250, 2, 0);
    expect(sent).toBe(500);
  });

  it("stops early when told to", async () => {
    const { sent } = await runWithAcks(1000, 10, 0, (n) => n >= 100);
    expect(sent).toBeGreaterThanOrEqual(100);
    expect(sent).toBeLessThanOrEqual(120);
  });
});
