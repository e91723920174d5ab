/** The periodic worker: rounds in sequence, errors to the caller, stop waits for the round in flight. */
import { describe, expect, it } from "vitest";
import { startPeriodic } from "./periodic.ts";

/** A promise and its resolver, for a test to open when it chooses. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

describe("startPeriodic", () => {
  it("runs rounds one after another, hands failures to onError, and keeps going", async () => {
    let active = 0;
    let maxActive = 0;
    let rounds = 0;
    const errors: unknown[] = [];
    const third = gate();
    const worker = startPeriodic({
      everyMs: 1,
      round: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        rounds++;
        await Promise.resolve();
        active--;
        if (rounds === 2) throw new Error("round 2 failed");
        if (rounds === 3) third.open();
      },
      onError: (err) => errors.push(err),
    });
    await third.opened;
    await worker.stop();
    expect(maxActive).toBe(1);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe("round 2 failed");
  });

  it("stop() waits for the round in flight, tells it it is stopping, and schedules no more", async () => {
    const started = gate();
    const release = gate();
    let sawStopping = false;
    let rounds = 0;
    const worker = startPeriodic({
      everyMs: 1,
      round: async (stopping) => {
        rounds++;
        started.open();
        await release.opened;
        sawStopping = stopping();
      },
      onError: () => undefined,
    });
    await started.opened;
    let stopped = false;
    const stopping = worker.stop().then(() => (stopped = true));
    await Promise.resolve();
    expect(stopped).toBe(false);
    release.open();
    await stopping;
    expect(sawStopping).toBe(true);
    expect(rounds).toBe(1);
  });
});
