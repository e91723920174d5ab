/** One socket write per event-loop turn (nats-write-coalescing.ts), against a real nats-server, across a reconnect. */
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "./logger.ts";
import { connectNats, type NatsConnection } from "./nats.ts";
import { natsWritesCoalesced } from "./nats-write-coalescing.ts";
import { eventually, startTestNats, type TestNats } from "./testing/index.ts";

const logger = createLogger("test", "silent");
let nats: TestNats;
let writer: NatsConnection;
let reader: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  writer = await connectNats({ url: nats.url, name: "writer", logger, coalesceWrites: true });
  reader = await connectNats({ url: nats.url, name: "reader", logger });
});
afterAll(async () => {
  await writer?.close();
  await reader?.close();
  await nats?.destroy();
});

/** The bytes of each write the connection's socket makes from now on. */
function recordWrites(nc: NatsConnection): string[] {
  const socket = (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport.socket;
  const writes: string[] = [];
  const s = socket as unknown as {
    _write(chunk: Buffer, encoding: string, cb: (err?: Error) => void): void;
    _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error) => void): void;
  };
  const write = s._write.bind(socket);
  const writev = s._writev.bind(socket);
  s._write = (chunk, encoding, cb) => {
    writes.push(Buffer.from(chunk).toString("latin1"));
    write(chunk, encoding, cb);
  };
  s._writev = (chunks, cb) => {
    writes.push(chunks.map((c) => Buffer.from(c.chunk).toString("latin1")).join(""));
    writev(chunks, cb);
  };
  return writes;
}

/** Publishes one message per setImmediate callback: separate callbacks of one event-loop turn. */
async function publishInCallbacks(nc: NatsConnection, subject: string, n: number): Promise<void> {
  await new Promise<void>((done) => {
    for (let i = 0; i < n; i++) {
      setImmediate(() => {
        nc.publish(subject, `m${i}`);
        if (i === n - 1) done();
      });
    }
  });
  await nc.flush();
}

async function received(subject: string, n: number, publish: () => Promise<void>): Promise<string[]> {
  const got: string[] = [];
  const sub = reader.subscribe(subject, {
    callback: (_err, msg) => {
      got.push(msg.string());
    },
  });
  await reader.flush();
  await publish();
  await eventually(async () => (got.length >= n ? true : undefined));
  sub.unsubscribe();
  return got;
}

describe("NATS write coalescing", () => {
  it("the publishes of separate callbacks of one turn leave in one socket write, in order", async () => {
    expect(natsWritesCoalesced(writer)).toBe(true);
    const writes = recordWrites(writer);
    const got = await received("coalesce.a", 5, () => publishInCallbacks(writer, "coalesce.a", 5));
    expect(got).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    const carrying = writes.filter((w) => w.includes("PUB coalesce.a"));
    expect(carrying).toHaveLength(1);
    expect(carrying[0]!.match(/PUB coalesce\.a/g)).toHaveLength(5);
  });

  it("keeps doing so on the transport a reconnect creates", async () => {
    const before = (writer as unknown as { protocol: { transport: object } }).protocol.transport;
    await nats.stop("SIGKILL");
    await nats.start();
    await eventually(async () => {
      const now = (writer as unknown as { protocol: { transport: object } }).protocol.transport;
      if (now === before || writer.isClosed()) return undefined;
      try {
        await writer.flush();
        await reader.flush();
        return true;
      } catch {
        return undefined;
      }
    }, 20_000, 100);
    expect(natsWritesCoalesced(writer)).toBe(true);
    const writes = recordWrites(writer);
    const got = await received("coalesce.b", 4, () => publishInCallbacks(writer, "coalesce.b", 4));
    expect(got).toEqual(["m0", "m1", "m2", "m3"]);
    expect(writes.filter((w) => w.includes("PUB coalesce.b"))).toHaveLength(1);
  });
});
