/**
 * Announces position changes on TRACKING: `asset.moved` when the location
 * changed, `asset.seen` when only the last-seen time advanced. One event per
 * asset per batch (its newest state); the Nats-Msg-Id is derived from that
 * state, so publishing it again de-duplicates.
 */
import { encodeJson, trackingEventSubject, type AssetPositionEvent } from "@whereabouts/shared";
import type { JetStreamClient } from "@nats-io/jetstream";
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

/** Publishes every event and waits for JetStream to store them all (throws otherwise). */
export async function publishPositions(
  js: JetStreamClient,
  events: Array<{ state: PositionState; verb: PositionVerb }>,
): Promise<void> {
  const window = 256;
  for (let i = 0; i < events.length; i += window) {
    await Promise.all(
      events.slice(i, i + window).map(({ state, verb }) => {
        const { subject, event } = positionEvent(state, verb);
        return js.publish(subject, encodeJson(event), { msgID: event.event_id });
      }),
    );
  }
}
