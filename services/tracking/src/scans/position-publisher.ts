/**
 * Announces position changes on TRACKING: per asset, `moved` when the
 * location changed, `seen` when only the last-seen time advanced, each the
 * asset's newest state in the batch; grouped into one `asset.positions`
 * message per organization (chunked at POSITION_BATCH_MAX). A message per
 * asset made JetStream store, deliver and track the acks of tens of thousands
 * of messages a second at full ingest; a batch message carries a thousand.
 * The Nats-Msg-Id is a digest of the content, so publishing the same batch
 * again de-duplicates; a redelivered batch grouped differently is applied
 * again, which consumers make harmless (newer states only).
 *
 * Publishing is JetStream publish-with-ack without `js.publish`'s per-message
 * promise, timer and Error objects: every message carries a reply subject
 * under one wildcard inbox, and the call resolves when JetStream has
 * acknowledged (stored or de-duplicated) each, or fails on the first error, a
 * "no responders" (no stream), or the timeout.
 */
import { createHash } from "node:crypto";
import { createInbox, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import {
  encodeJson,
  POSITION_BATCH_MAX,
  POSITION_BATCH_VERB,
  trackingEventSubject,
  type AssetPositionBatch,
  type AssetPositionEvent,
  type AssetPositionItem,
} from "@whereabouts/shared";
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

function positionItem(state: PositionState, verb: PositionVerb): AssetPositionItem {
  const { event } = positionEvent(state, verb);
  return {
    event_id: event.event_id,
    asset_id: event.asset_id,
    location_id: event.location_id,
    observed_at: event.observed_at,
    seq: event.seq,
    previous_location_id: event.previous_location_id ?? null,
    verb,
  };
}

/** The batch messages for a set of position changes: per organization, chunked. */
export function positionBatches(events: Array<{ state: PositionState; verb: PositionVerb }>): Array<{ subject: string; batch: AssetPositionBatch }> {
  const byOrg = new Map<number, AssetPositionItem[]>();
  for (const { state, verb } of events) {
    let items = byOrg.get(state.orgId);
    if (!items) byOrg.set(state.orgId, (items = []));
    items.push(positionItem(state, verb));
  }
  const out: Array<{ subject: string; batch: AssetPositionBatch }> = [];
  for (const [orgId, items] of byOrg) {
    for (let i = 0; i < items.length; i += POSITION_BATCH_MAX) {
      out.push({
        subject: trackingEventSubject(orgId, "asset", POSITION_BATCH_VERB),
        batch: { version: 1, org_id: orgId, positions: items.slice(i, i + POSITION_BATCH_MAX) },
      });
    }
  }
  return out;
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

  /** Publishes every change; resolves once JetStream stored (or de-duplicated) all of them. */
  function publish(changes: Array<{ state: PositionState; verb: PositionVerb }>): Promise<void> {
    const events = positionBatches(changes);
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
        () => fail(new PublishError(`${remaining} of ${events.length} position messages not acknowledged in time`)),
        options.ackTimeoutMs,
      );
      try {
        for (const { subject, batch } of events) {
          const data = encodeJson(batch);
          const id = next++;
          ids.push(id);
          pending.set(id, settle);
          const h = natsHeaders();
          h.set("Nats-Msg-Id", `positions:${batch.org_id}:${createHash("sha1").update(data).digest("base64url")}`);
          nc.publish(subject, data, { reply: `${prefix}${id}`, headers: h });
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
