/**
 * Publishing scan events to JetStream the way a fleet of readers would:
 * as fast as acks allow with a bounded window, or paced at a rate in 20 ms
 * ticks. Shared by `npm run bench`, `npm run chaos` and scripts/bench-ingest.ts.
 */
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";

/**
 * Publishes one event until JetStream acknowledges it, through a broker
 * outage: a try that times out may still have been stored, so every try
 * carries the same `msgID` and the server keeps one copy (its ack then says
 * `duplicate`). Rejects once `deadlineMs` has passed without an ack.
 */
export async function publishUntilStored(
  js: JetStreamClient,
  item: { subject: string; data: Uint8Array; msgID: string },
  o: { attemptTimeoutMs: number; deadlineMs: number; retryDelayMs?: number },
): Promise<{ attempts: number; duplicate: boolean }> {
  const deadline = Date.now() + o.deadlineMs;
  for (let attempts = 1; ; attempts++) {
    try {
      const ack = await js.publish(item.subject, item.data, { msgID: item.msgID, timeout: o.attemptTimeoutMs });
      return { attempts, duplicate: ack.duplicate };
    } catch (err) {
      if (Date.now() + (o.retryDelayMs ?? 250) > deadline) {
        throw new Error(`${item.subject} ${item.msgID}: no ack within ${o.deadlineMs} ms (${attempts} tries)`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, o.retryDelayMs ?? 250));
    }
  }
}

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
 * in 20 ms ticks. What is due is counted from the clock, not from the ticks:
 * a timer that fires late (a busy event loop, a loaded machine) sends the
 * ticks it missed at once instead of offering less. By default each tick's
 * sends finish before the next tick: a publisher whose acks fall behind
 * offers less by the end of the window, and the count returned says how
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
  const windowMs = seconds * 1000;
  const pending = new Set<Promise<unknown>>();
  let sent = 0;
  while (Date.now() - start < windowMs && !stop()) {
    // Due by the end of this tick, at most the whole window's worth.
    const due = Math.floor((perSecond * Math.min(windowMs, Date.now() - start + tickMs)) / 1000);
    const acks: Array<Promise<unknown>> = [];
    while (sent < due) acks.push(send(++sent));
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
