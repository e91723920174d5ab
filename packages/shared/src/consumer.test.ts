/**
 * runBatchConsumer's byte bound: a consumer that has fallen behind a stream of
 * large messages (tracking's positions messages carry a thousand positions)
 * takes batches of at most `maxBatchBytes` (at least one message), so its
 * transactions and its memory stay bounded however far behind it is.
 */
import { jetstream } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatchConsumer } from "./consumer.ts";
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
