/**
 * Test support: publishes contract-valid CATALOG and TRACKING events for one
 * organization, as catalog and tracking would, so reporting can be tested on
 * its own. Every payload is checked against the shared contracts first.
 *
 * Like catalog, a catalog event is announced (read-your-writes watermark)
 * once stored. Position events are scan data, eventually visible: by default
 * each one waits until reporting's TRACKING durable has applied it, so a test
 * reads after it without sleeping.
 */
import { randomUUID } from "node:crypto";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { publishCatalogEvent, testAssetView, testCatalogEventHead, testLocationView, testTagRecord, testTagView } from "@whereabouts/shared/testing";
import {
  AssetPositionEvent,
  DURABLES,
  STREAMS,
  waitForConsumer,
  CatalogEvent,
  encodeJson,
  trackingEventSubject,
  type NatsConnection,
  type TagView,
} from "@whereabouts/shared";

const EPOCH = "2026-01-01T00:00:00.000Z";

export interface LocationInput {
  id: number;
  key: string;
  version?: number;
  validFrom?: string;
  validTo?: string | null;
  deletedAt?: string | null;
  verb?: "created" | "updated" | "renamed" | "deleted";
}

export interface TagInput {
  id: number;
  assetId: number;
  value: string;
  tagType?: string;
  isActive?: boolean;
  validFrom?: string;
  validTo?: string | null;
  deletedAt?: string | null;
  version?: number;
  ownerType?: "asset" | "location";
  verb?: "attached" | "detached";
}

export interface AssetInput {
  id: number;
  key: string;
  name?: string;
  version?: number;
  validFrom?: string;
  validTo?: string | null;
  deletedAt?: string | null;
  /** Embedded tags (AssetView.tags). */
  tags?: Array<Omit<TagInput, "assetId">>;
  verb?: "created" | "updated" | "renamed" | "deleted";
}

export interface PositionInput {
  assetId: number;
  locationId: number;
  observedAt: string;
  seq: number;
  verb?: "moved" | "seen";
}

const tagView = (t: Omit<TagInput, "assetId">): TagView =>
  testTagView({ id: t.id, value: t.value, tag_type: t.tagType, is_active: t.isActive, valid_from: t.validFrom, valid_to: t.validTo }, EPOCH);

export function createEventPublisher(nc: NatsConnection, orgId: number, options: { awaitPositions?: boolean } = {}) {
  const js = jetstream(nc);
  const publish = async (subject: string, payload: unknown, msgID = randomUUID()) => {
    await js.publish(subject, encodeJson(payload), { msgID });
  };
  /** Waits until reporting has applied every position event published so far. */
  const positionsApplied = async () =>
    waitForConsumer(await jetstreamManager(nc), STREAMS.TRACKING.name, DURABLES.reportingTracking, 10_000);
  const head = (id: number, version: number, verb: CatalogEvent["verb"]) => testCatalogEventHead(orgId, id, version, verb);

  return {
    orgId,
    publish,
    positionsApplied,

    async location(input: LocationInput) {
      const data = testLocationView(
        { id: input.id, external_key: input.key, name: `Location ${input.key}`, valid_from: input.validFrom, valid_to: input.validTo, deleted_at: input.deletedAt },
        EPOCH,
      );
      const verb = input.verb ?? (input.deletedAt ? "deleted" : "created");
      const event = CatalogEvent.parse({ ...head(input.id, input.version ?? 1, verb), entity: "location", data });
      await publishCatalogEvent(nc, event, randomUUID());
    },

    async asset(input: AssetInput) {
      const data = testAssetView(
        {
          id: input.id,
          external_key: input.key,
          name: input.name ?? `Asset ${input.key}`,
          valid_from: input.validFrom,
          valid_to: input.validTo,
          deleted_at: input.deletedAt,
          tags: (input.tags ?? []).map(tagView),
        },
        EPOCH,
      );
      const verb = input.verb ?? (input.deletedAt ? "deleted" : "created");
      const event = CatalogEvent.parse({ ...head(input.id, input.version ?? 1, verb), entity: "asset", data });
      await publishCatalogEvent(nc, event, randomUUID());
    },

    async tag(input: TagInput) {
      const data = testTagRecord(
        {
          id: input.id,
          value: input.value,
          tag_type: input.tagType,
          is_active: input.isActive,
          valid_from: input.validFrom,
          valid_to: input.validTo,
          deleted_at: input.deletedAt,
          owner_type: input.ownerType ?? "asset",
          owner_id: input.assetId,
        },
        EPOCH,
      );
      const verb = input.verb ?? (input.deletedAt ? "detached" : "attached");
      const event = CatalogEvent.parse({ ...head(input.id, input.version ?? 1, verb), entity: "tag", data });
      await publishCatalogEvent(nc, event, randomUUID());
    },

    async position(input: PositionInput) {
      const event = AssetPositionEvent.parse({
        version: 1,
        event_id: randomUUID(),
        org_id: orgId,
        asset_id: input.assetId,
        location_id: input.locationId,
        observed_at: input.observedAt,
        seq: input.seq,
      });
      await publish(trackingEventSubject(orgId, "asset", input.verb ?? "moved"), event);
      if (options.awaitPositions ?? true) await positionsApplied();
    },

    /** A located, scanned asset in one call. */
    async scannedAsset(input: AssetInput & { locationId: number; observedAt: string; seq?: number }) {
      await this.asset(input);
      await this.position({ assetId: input.id, locationId: input.locationId, observedAt: input.observedAt, seq: input.seq ?? 1 });
    },
  };
}
export type EventPublisher = ReturnType<typeof createEventPublisher>;
