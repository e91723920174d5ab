/**
 * Announces position changes on TRACKING: `asset.moved` when the location
 * changed, `asset.seen` when only the last-seen time advanced. One event per
 * asset per batch (its newest state); the Nats-Msg-Id is derived from that
 * state, so publishing it again de-duplicates.
 *
 * A batch is thousands of events. `js.publish` costs a promise, a timer and
 * two Error objects (async stack traces) per message, which made it the
 * largest CPU cost of ingestion; this publisher does the same JetStream
 * publish-with-ack, batched: every message carries a reply subject under one
 * wildcard inbox, and the batch resolves when JetStream has acknowledged
 * (stored or de-duplicated) each of them, or fails on the first error, a "no
 * responders" (no stream), or the timeout.
 */
import { createInbox, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { encodeJson, trackingEventSubject, type AssetPositionEvent } from "@whereabouts/shared";
import type { PositionState } from "./scan-store.ts";

export type PositionVerb = "moved" | "seen";

export function positionEvent(state: PositionState, verb: PositionVerb): { subject: string; event: AssetPositionEvent } {
  const eventId = `${verb}:${state.orgId}:${state.assetId}:${state.seq}`;
  return {
    subject: trackingEventSubject(state.orgId, "asset", verb),
    event: {
      version: 1,
      event_id: eventId,
      org_id: state.orgId,
      asset_id: state.assetId,
      location_id: state.locationId,
      observed_at: state.observedAt,
      seq: state.seq,
      previous_location_id: state.previousLocationId,
    },
  };
}

export const verbOf = (state: PositionState): PositionVerb =>
  state.previousLocationId === state.locationId ? "seen" : "moved";

export class PublishError extends Error {
  override readonly name = "PublishError";
}

const decoder = new TextDecoder();

export function createPositionPublisher(nc: NatsConnection, options: { ackTimeoutMs: number }) {
  const prefix = `${createInbox()}.`;
  const pending = new Map<number, (err?: Error) => void>();
  let next = 0;

  const sub = nc.subscribe(`${prefix}*`, {
    callback: (err, msg) => {
      if (err) return;
      const id = Number(msg.subject.slice(prefix.length));
      const settle = pending.get(id);
      if (!settle) return;
      pending.delete(id);
      if (msg.headers?.code === 503) return settle(new PublishError("no stream captures the position events"));
      try {
        const ack = JSON.parse(decoder.decode(msg.data)) as { error?: { description?: string } };
        settle(ack.error ? new PublishError(`JetStream refused an event: ${ack.error.description ?? "error"}`) : undefined);
      } catch {
        settle(new PublishError("unreadable JetStream acknowledgement"));
      }
    },
  });

  /** Publishes every event; resolves once JetStream stored (or de-duplicated) all of them. */
  function publish(events: Array<{ state: PositionState; verb: PositionVerb }>): Promise<void> {
    if (!events.length) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const ids: number[] = [];
      let remaining = events.length;
      let failed = false;
      const fail = (err: Error) => {
        if (failed) return;
        failed = true;
        clearTimeout(timer);
        for (const id of ids) pending.delete(id);
        reject(err);
      };
      const settle = (err?: Error) => {
        if (err) return fail(err);
        if (--remaining === 0 && !failed) {
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(
        () => fail(new PublishError(`${remaining} of ${events.length} position events not acknowledged in time`)),
        options.ackTimeoutMs,
      );
      try {
        for (const { state, verb } of events) {
          const { subject, event } = positionEvent(state, verb);
          const id = next++;
          ids.push(id);
          pending.set(id, settle);
          const h = natsHeaders();
          h.set("Nats-Msg-Id", event.event_id);
          nc.publish(subject, encodeJson(event), { reply: `${prefix}${id}`, headers: h });
        }
      } catch (err) {
        fail(err instanceof Error ? err : new PublishError(String(err)));
      }
    });
  }

  return {
    publish,
    close: () => sub.unsubscribe(),
  };
}
export type PositionPublisher = ReturnType<typeof createPositionPublisher>;
