/** The light publish-with-ack against a real nats-server with JetStream: sequences, de-duplication, every refusal. */
import { DiscardPolicy, jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAckedPublisher, PublishError, type AckedPublisher } from "./acked-publisher.ts";
import { createLogger } from "./logger.ts";
import { connectNats, type NatsConnection } from "./nats.ts";
import { startTestNats, type TestNats } from "./testing/index.ts";

const logger = createLogger("test", "silent");
let nats: TestNats;
let nc: NatsConnection;
let publisher: AckedPublisher;
const data = (text: string) => new TextEncoder().encode(text);

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats({ url: nats.url, name: "acked-publisher-test", logger });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "EVENTS", subjects: ["events.>"] });
  await jsm.streams.add({ name: "SMALL", subjects: ["small.>"], max_msgs: 1, discard: DiscardPolicy.New });
  publisher = createAckedPublisher(nc, { ackTimeoutMs: 300 });
}, 30_000);

afterAll(async () => {
  publisher?.close();
  await nc?.close();
  await nats?.destroy();
});

async function refusal(promise: Promise<unknown>): Promise<string> {
  const outcome = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(outcome).toBeInstanceOf(PublishError);
  return (outcome as PublishError).message;
}

describe("the acked publisher", () => {
  it("resolves with each message's stream sequence, in publish order, and stores the payload", async () => {
    const seqs = await Promise.all([1, 2, 3].map((i) => publisher.publish("events.a", data(`m${i}`), `id-${i}`)));
    expect(seqs).toEqual([1, 2, 3]);
    const jsm = await jetstreamManager(nc);
    const stored = await jsm.streams.getMessage("EVENTS", { seq: 2 });
    expect(new TextDecoder().decode(stored!.data)).toBe("m2");
    expect(stored!.header.get("Nats-Msg-Id")).toBe("id-2");
  });

  it("answers a repeated Nats-Msg-Id with the first message's sequence, storing nothing", async () => {
    const first = await publisher.publish("events.b", data("once"), "dedup-1");
    expect(await publisher.publish("events.b", data("again"), "dedup-1")).toBe(first);
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info("EVENTS")).state.last_seq).toBe(first);
  });

  it("refuses a subject no stream captures, a message the stream rejects, and a missing acknowledgement", async () => {
    expect(await refusal(publisher.publish("nowhere.x", data("x"), "n-1"))).toMatch(/no stream/);
    await publisher.publish("small.a", data("fits"), "s-1");
    expect(await refusal(publisher.publish("small.a", data("full"), "s-2"))).toMatch(/refused.*maximum messages/i);
    // Someone listens but nothing acknowledges: the deadline fails it.
    const silent = nc.subscribe("silent.x");
    expect(await refusal(publisher.publish("silent.x", data("x"), "q-1"))).toMatch(/not acknowledged within 300 ms/);
    silent.unsubscribe();
    // The publisher still works afterwards.
    expect(await publisher.publish("events.c", data("after"), "after-1")).toBeGreaterThan(0);
  });

  it("fails what is still waiting when closed", async () => {
    const other = createAckedPublisher(nc, { ackTimeoutMs: 10_000 });
    const silent = nc.subscribe("silent.y");
    const waiting = other.publish("silent.y", data("x"), "c-1");
    other.close();
    expect(await refusal(waiting)).toMatch(/closed/);
    silent.unsubscribe();
  });
});
