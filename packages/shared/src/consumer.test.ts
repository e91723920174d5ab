/**
 * runBatchConsumer's byte bound: a consumer that has fallen behind a stream of
 * large messages (tracking's positions messages carry a thousand positions)
 * takes batches of at most `maxBatchBytes` (at least one message), so its
 * transactions and its memory stay bounded however far behind it is. And its
 * linger: under a stream of small messages a batch waits briefly for more
 * (until it is full), but the first message starts at once.
 */
import { jetstream } from "@nats-io/jetstream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatchConsumer } from "./consumer.ts";
import { serviceUnavailable } from "./errors.ts";
import { createLogger } from "./logger.ts";
import { connectNats, ensureStreams, type NatsConnection } from "./nats.ts";
import { STREAMS } from "./subjects.ts";
import { eventually, startTestNats, type TestNats } from "./testing/index.ts";

const logger = createLogger("test", "silent");
let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats({ url: nats.url, name: "consumer-test", logger });
  await ensureStreams(nc);
});
afterAll(async () => {
  await nc?.close();
  await nats?.destroy();
});

describe("runBatchConsumer bounded by bytes", () => {
  it("hands a consumer that is behind batches of at most maxBatchBytes, a larger message alone", async () => {
    const js = jetstream(nc);
    const KB = 1024;
    const sizes = [...Array.from({ length: 30 }, () => 10 * KB), 40 * KB, ...Array.from({ length: 9 }, () => 10 * KB)];
    // Published before the consumer starts: it begins 400 KB behind.
    for (const [i, size] of sizes.entries()) await js.publish(`tracking.events.1.asset.positions`, new Uint8Array(size).fill(65 + (i % 26)));
    const batches: number[][] = [];
    // Each batch returns only once the consumer holds two messages more (or all that are left), so every
    // batch after the first is cut from a buffer as a consumer far behind has it, whatever this machine's speed.
    let worker: Awaited<ReturnType<typeof runBatchConsumer>> | undefined = undefined;
    worker = await runBatchConsumer({
      nc,
      spec: { stream: STREAMS.TRACKING.name, durable: "bytes-test", ackWaitMs: 30_000, maxDeliver: -1, batchSize: 500, maxBatchBytes: 25 * KB, pullMessages: 8 },
      logger,
      handle: async (messages) => {
        batches.push(messages.map((m) => m.data.length));
        for (const m of messages) m.ack();
        const left = sizes.length - batches.flat().length;
        await eventually(async () => (worker && worker.buffered() >= Math.min(2, left) ? true : undefined));
      },
    });
    try {
      await eventually(async () => (worker!.processed() === sizes.length ? true : undefined));
      for (const batch of batches) {
        expect(batch.length).toBeGreaterThan(0);
        // Within the bound, or one message that is larger than it by itself.
        if (batch.length > 1) expect(batch.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(25 * KB);
      }
      expect(batches.flat()).toEqual(sizes);
      expect(batches).toContainEqual([40 * KB]);
      // Two 10 KB messages fit a batch: the bound is not one message a batch.
      expect(batches.some((b) => b.length === 2)).toBe(true);
    } finally {
      await worker.stop();
    }
  });
});

describe("runBatchConsumer lingering for a fuller batch", () => {
  /** A consumer on its own durable that records its batches; `hold` keeps the next batch from returning until released. */
  async function recording(durable: string, lingerMs: number, batchSize: number) {
    const batches: string[][] = [];
    let hold: Promise<void> | undefined;
    const worker = await runBatchConsumer({
      nc,
      spec: { stream: STREAMS.TRACKING.name, durable, filterSubjects: [`tracking.events.9.asset.${durable}`], ackWaitMs: 30_000, maxDeliver: -1, batchSize, lingerMs },
      logger,
      handle: async (messages) => {
        batches.push(messages.map((m) => new TextDecoder().decode(m.data)));
        for (const m of messages) m.ack();
        await hold;
      },
    });
    const js = jetstream(nc);
    const publish = async (...bodies: string[]) => {
      for (const body of bodies) await js.publish(`tracking.events.9.asset.${durable}`, new TextEncoder().encode(body));
    };
    const holdNext = () => {
      let release!: () => void;
      hold = new Promise<void>((r) => (release = r));
      return () => {
        hold = undefined;
        release();
      };
    };
    /** `first` taken as a batch that is held running while `waiting` arrive and wait in the buffer; returns its release. */
    const firstHeldWhile = async (first: string, ...waiting: string[]) => {
      const release = holdNext();
      await publish(first);
      await eventually(async () => (batches.length === 1 ? true : undefined));
      await publish(...waiting);
      await eventually(async () => (worker.buffered() === waiting.length ? true : undefined));
      return release;
    };
    return { worker, batches, publish, holdNext, firstHeldWhile };
  }

  it("starts the first message at once, then gathers messages that keep coming until the batch is full", async () => {
    // A minute of linger: a batch that waited for it would outlast the test's own timeout.
    const c = await recording("linger", 60_000, 6);
    try {
      // While the first batch runs, two more arrive and wait in the buffer.
      const release = await c.firstHeldWhile("m1", "m2", "m3");
      release();
      // The previous batch has just ended: the next waits for more rather than starting with two.
      await c.publish("m4", "m5", "m6", "m7");
      await eventually(async () => (c.worker.processed() === 7 ? true : undefined));
      expect(c.batches).toEqual([["m1"], ["m2", "m3", "m4", "m5", "m6", "m7"]]);
    } finally {
      await c.worker.stop();
    }
  });

  it("stops at once while a batch lingers, and hands over what it held", async () => {
    const c = await recording("linger-stop", 60_000, 100);
    const release = await c.firstHeldWhile("a", "b");
    release();
    // "b" now lingers for more (a minute, well past the test's timeout) until stop wakes it.
    await c.worker.stop();
    expect(c.batches.flat()).toEqual(["a", "b"]);
  });

  it("takes batches as they come with no linger", async () => {
    const c = await recording("no-linger", 0, 6);
    try {
      const release = await c.firstHeldWhile("m1", "m2", "m3");
      const holdAgain = c.holdNext();
      release();
      await eventually(async () => (c.batches.length === 2 ? true : undefined));
      await c.publish("m4");
      holdAgain();
      await eventually(async () => (c.worker.processed() === 4 ? true : undefined));
      expect(c.batches).toEqual([["m1"], ["m2", "m3"], ["m4"]]);
    } finally {
      await c.worker.stop();
    }
  });
});

describe("runBatchConsumer on a failed batch", () => {
  /** Runs a consumer whose first batch throws `failure`; resolves with the log lines once it went through again. */
  async function logsOfFailure(durable: string, failure: Error) {
    const lines: Array<{ level: number; msg: string; reason?: string }> = [];
    const captured = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const js = jetstream(nc);
    await js.publish(`tracking.events.2.asset.${durable}`, new Uint8Array([1]));
    let calls = 0;
    const worker = await runBatchConsumer({
      nc,
      spec: { stream: STREAMS.TRACKING.name, durable, filterSubjects: [`tracking.events.2.asset.${durable}`], ackWaitMs: 30_000, maxDeliver: -1, batchSize: 10, pullMessages: 10 },
      logger: captured,
      retryDelayMs: 20,
      handle: async (messages) => {
        if (calls++ === 0) throw failure;
        for (const m of messages) m.ack();
      },
    });
    try {
      await eventually(async () => (worker.processed() === 1 ? true : undefined));
    } finally {
      await worker.stop();
    }
    return lines.filter((l) => l.msg.includes("redelivered"));
  }

  it("logs a batch that waits for a read model (503) as a warning with its reason, and redelivers it", async () => {
    const lines = await logsOfFailure("waits-test", serviceUnavailable("The read model is catching up; retry shortly"));
    expect(lines).toEqual([expect.objectContaining({ level: 40, reason: "The read model is catching up; retry shortly" })]);
  });

  it("logs any other failure as an error, and redelivers it", async () => {
    const lines = await logsOfFailure("fails-test", new Error("connection reset"));
    expect(lines).toEqual([expect.objectContaining({ level: 50, msg: "batch failed; will be redelivered" })]);
  });
});
