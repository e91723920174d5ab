/**
 * What `npm run chaos` relies on to count exactly: publishUntilStored keeps
 * publishing through a broker that is SIGKILLed and started again on the
 * same port and store, every event ends up stored once (retries carry the
 * same Nats-Msg-Id), and nothing acknowledged before the kill is lost.
 * A real nats-server; bounded to a few hundred events.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectNats, createLogger, encodeJson, ensureStreams, scanSubject, STREAMS, type NatsConnection } from "@whereabouts/shared";
import { startTestNats, type TestNats } from "@whereabouts/shared/testing";
import { publishUntilStored } from "../scripts/bench/scan-publisher.ts";

let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats({ url: nats.url, name: "chaos-publish-test", logger: createLogger("test", "silent") });
  await ensureStreams(nc);
});

afterAll(async () => {
  await nc?.close();
  await nats?.destroy();
});

describe("publishUntilStored", () => {
  it("stores every event exactly once across a broker SIGKILL and restart", { timeout: 60_000 }, async () => {
    const js = jetstream(nc);
    const events = 300;
    let attemptsOverOne = 0;
    let duplicates = 0;
    const publish = async (i: number) => {
      const r = await publishUntilStored(
        js,
        { subject: scanSubject(1, "chaos-test"), data: encodeJson({ event_id: `e-${i}` }), msgID: `e-${i}` },
        { attemptTimeoutMs: 1000, deadlineMs: 30_000, retryDelayMs: 100 },
      );
      if (r.attempts > 1) attemptsOverOne++;
      if (r.duplicate) duplicates++;
    };
    // The first third stored before the crash, the rest published into the outage.
    await Promise.all(Array.from({ length: 100 }, (_, i) => publish(i)));
    await nats.stop("SIGKILL");
    const during = Promise.all(Array.from({ length: events - 100 }, (_, i) => publish(100 + i)));
    await nats.start();
    await during;

    expect(attemptsOverOne).toBeGreaterThan(0);
    // A try whose ack was lost after the store: the same id again changes nothing (the dedup state survived the crash).
    await Promise.all(Array.from({ length: 100 }, (_, i) => publish(i)));
    expect(duplicates).toBe(100);
    const info = await (await jetstreamManager(nc)).streams.info(STREAMS.SCANS.name);
    expect(info.state.messages).toBe(events);
  });

  it("gives up with the subject and id once its deadline passes", async () => {
    const closed = await connectNats({ url: nats.url, name: "chaos-publish-closed", logger: createLogger("test", "silent") });
    await closed.close();
    await expect(
      publishUntilStored(jetstream(closed), { subject: scanSubject(1, "chaos-test"), data: encodeJson({}), msgID: "never" }, { attemptTimeoutMs: 100, deadlineMs: 300, retryDelayMs: 50 }),
    ).rejects.toThrow(/scans\.1\.chaos-test never: no ack within 300 ms/);
  });
});
