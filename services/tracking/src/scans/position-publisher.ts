/**
 * Announces position changes on TRACKING: per asset, `moved` when the
 * location changed, `seen` when only the last-seen time advanced, each the
 * asset's newest state in the batch; the moves grouped into `asset.positions`
 * messages per organization, the sightings into `sightings.positions` ones
 * (catalog takes moves only), chunked at POSITION_BATCH_ITEMS. A message per
 * asset made JetStream store, deliver and track the acks of tens of thousands
 * of messages a second at full ingest; a batch message carries hundreds.
 * The Nats-Msg-Id is a digest of the content, so publishing the same batch
 * again de-duplicates; a redelivered batch grouped differently is applied
 * again, which consumers make harmless (newer states only).
 *
 * Publishing is the shared light publish-with-ack (acked-publisher.ts): the
 * call resolves when JetStream has acknowledged (stored or de-duplicated)
 * each message, or fails on the first error, a "no responders" (no stream),
 * or the timeout.
 */
import { createHash } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  createAckedPublisher,
  encodeJson,
  POSITION_BATCH_ITEMS,
  positionBatchSubject,
  type AssetPositionBatch,
  type AssetPositionItem,
} from "@whereabouts/shared";
import type { PositionState } from "./scan-store.ts";

export type PositionVerb = "moved" | "seen";

/** One item of a batch message: the asset's newest state, its event id derived from it (the same on a re-announcement). */
function positionItem(state: PositionState, verb: PositionVerb): AssetPositionItem {
  return {
    event_id: `${verb}:${state.orgId}:${state.assetId}:${state.seq}`,
    asset_id: state.assetId,
    location_id: state.locationId,
    observed_at: state.observedAt,
    seq: state.seq,
    previous_location_id: state.previousLocationId ?? null,
    verb,
  };
}

/** The batch messages for a set of position changes: per organization, moves and sightings apart, chunked. */
export function positionBatches(events: Array<{ state: PositionState; verb: PositionVerb }>): Array<{ subject: string; batch: AssetPositionBatch }> {
  const groups = new Map<string, { orgId: number; verb: PositionVerb; items: AssetPositionItem[] }>();
  for (const { state, verb } of events) {
    const key = `${state.orgId}:${verb}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { orgId: state.orgId, verb, items: [] }));
    group.items.push(positionItem(state, verb));
  }
  const out: Array<{ subject: string; batch: AssetPositionBatch }> = [];
  for (const { orgId, verb, items } of groups.values()) {
    for (let i = 0; i < items.length; i += POSITION_BATCH_ITEMS) {
      out.push({
        subject: positionBatchSubject(orgId, verb),
        batch: { version: 1, org_id: orgId, positions: items.slice(i, i + POSITION_BATCH_ITEMS) },
      });
    }
  }
  return out;
}

export const verbOf = (state: PositionState): PositionVerb =>
  state.previousLocationId === state.locationId ? "seen" : "moved";

/** Publishes position batches with acknowledgement (the shared light publisher, see acked-publisher.ts). */
export function createPositionPublisher(nc: NatsConnection, options: { ackTimeoutMs: number }) {
  const publisher = createAckedPublisher(nc, options);

  /** Publishes every change; resolves once JetStream stored (or de-duplicated) all of them. */
  async function publish(changes: Array<{ state: PositionState; verb: PositionVerb }>): Promise<void> {
    await Promise.all(
      positionBatches(changes).map(({ subject, batch }) => {
        const data = encodeJson(batch);
        return publisher.publish(subject, data, `positions:${batch.org_id}:${createHash("sha1").update(data).digest("base64url")}`);
      }),
    );
  }

  return { publish, close: () => publisher.close() };
}
export type PositionPublisher = ReturnType<typeof createPositionPublisher>;
