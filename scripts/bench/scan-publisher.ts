/**
 * Publishing scan events to JetStream the way a fleet of readers would:
 * as fast as acks allow with a bounded window, or paced at a rate in 20 ms
 * ticks. Shared by `npm run bench` and scripts/bench-ingest.ts.
 */
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";

/** Publishes with at most `window` acks outstanding; resolves when every ack is in. */
export async function publishAll(js: JetStreamClient, items: Iterable<{ subject: string; data: Uint8Array; msgID?: string }>, window = 2000) {
  const inFlight = new Set<Promise<PubAck>>();
  for (const item of items) {
    const p = js.publish(item.subject, item.data, item.msgID ? { msgID: item.msgID } : undefined);
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p)).catch(() => undefined);
    if (inFlight.size >= window) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

/**
 * Calls `send(n)` `perSecond` times a second for `seconds` (or until `stop()`),
 * in 20 ms ticks. By default each tick's sends finish before the next tick:
 * a publisher that falls behind offers less, and the count returned says how
 * much. With `maxInFlight`, ticks go on while fewer than that many sends are
 * pending, so slow acks do not lower the offered rate until the window fills.
 */
export async function paced(
  perSecond: number,
  seconds: number,
  send: (n: number) => Promise<unknown>,
  stop: () => boolean = () => false,
  maxInFlight = 0,
): Promise<number> {
  const tickMs = 20;
  const start = Date.now();
  const pending = new Set<Promise<unknown>>();
  let owed = 0;
  let sent = 0;
  while (Date.now() - start < seconds * 1000 && !stop()) {
    owed += perSecond * (tickMs / 1000);
    const acks: Array<Promise<unknown>> = [];
    while (owed >= 1) {
      owed--;
      acks.push(send(++sent));
    }
    if (maxInFlight > 0) {
      for (const ack of acks) {
        pending.add(ack);
        void ack.finally(() => pending.delete(ack)).catch(() => undefined);
      }
      while (pending.size >= maxInFlight) await Promise.race(pending);
    } else {
      await Promise.all(acks);
    }
    const next = start + Math.ceil((Date.now() - start + 1) / tickMs) * tickMs;
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
  }
  await Promise.all(pending);
  return sent;
}
