/**
 * Test fixtures for tracking: catalog events published to the real CATALOG
 * stream (so tests need not run the catalog service), scans published to
 * SCANS, and readers for the dead-letter and TRACKING streams. Used by tests
 * only; nothing here is mocked.
 */
import { publishCatalogEvent, readStream, testAssetView, testCatalogEventHead, testLocationView, testTagRecord } from "@whereabouts/shared/testing";
import { jetstream } from "@nats-io/jetstream";
import {
  CatalogEvent,
  decodeJson,
  encodeJson,
  isPositionSubject,
  positionEventsOf,
  scanSubject,
  STREAMS,
  type AssetPositionEvent,
  type NatsConnection,
} from "@whereabouts/shared";

const EPOCH = "2020-01-01T00:00:00.000Z";
let eventCounter = 0;

export interface LocationFacts {
  id: number;
  external_key: string;
  valid_from?: string;
  valid_to?: string | null;
  deleted_at?: string | null;
}

export interface AssetFacts {
  id: number;
  external_key?: string;
  deleted_at?: string | null;
}

export interface TagFacts {
  id: number;
  tag_type?: string;
  value: string;
  owner_type: "asset" | "location";
  owner_id: number;
  is_active?: boolean;
  valid_from?: string;
  valid_to?: string | null;
  deleted_at?: string | null;
}

/** Publishes catalog events as catalog would, keeping per-entity versions. */
export function catalogFixture(nc: NatsConnection) {
  const versions = new Map<string, number>();
  const nextVersion = (entity: string, id: number) => {
    const v = (versions.get(`${entity}:${id}`) ?? 0) + 1;
    versions.set(`${entity}:${id}`, v);
    return v;
  };

  async function publish(event: CatalogEvent): Promise<CatalogEvent> {
    const parsed = CatalogEvent.parse(event);
    await publishCatalogEvent(nc, parsed, parsed.event_id);
    return parsed;
  }

  const head = (orgId: number, entity: "asset" | "location" | "tag", id: number, verb: CatalogEvent["verb"], version?: number) =>
    testCatalogEventHead(orgId, id, version ?? nextVersion(entity, id), verb, `test-${process.pid}-${++eventCounter}-${Date.now()}`);

  return {
    publish,
    location(orgId: number, f: LocationFacts, opts: { verb?: CatalogEvent["verb"]; version?: number } = {}) {
      return publish({ ...head(orgId, "location", f.id, opts.verb ?? "created", opts.version), entity: "location", data: testLocationView(f, EPOCH) });
    },
    asset(orgId: number, f: AssetFacts, opts: { verb?: CatalogEvent["verb"]; version?: number } = {}) {
      const data = testAssetView({ id: f.id, external_key: f.external_key ?? `ASSET-${f.id}`, deleted_at: f.deleted_at }, EPOCH);
      return publish({ ...head(orgId, "asset", f.id, opts.verb ?? "created", opts.version), entity: "asset", data });
    },
    tag(orgId: number, f: TagFacts, opts: { verb?: CatalogEvent["verb"]; version?: number } = {}) {
      return publish({ ...head(orgId, "tag", f.id, opts.verb ?? "attached", opts.version), entity: "tag", data: testTagRecord(f, EPOCH) });
    },
  };
}
export type CatalogFixture = ReturnType<typeof catalogFixture>;

/** Publishes a scan (any payload: objects are JSON-encoded, strings/bytes sent raw) and waits for SCANS to store it. */
export async function publishScan(
  nc: NatsConnection,
  orgId: number | string,
  payload: unknown,
  source = "reader-1",
  timeoutMs = 5000,
): Promise<number> {
  const data =
    payload instanceof Uint8Array ? payload : typeof payload === "string" ? new TextEncoder().encode(payload) : encodeJson(payload);
  const ack = await jetstream(nc).publish(scanSubject(orgId, source), data, { timeout: timeoutMs });
  return ack.seq;
}

export { readStream };

export async function deadLetters(nc: NatsConnection) {
  const messages = await readStream(nc, STREAMS.SCANS_DLQ.name);
  return messages.map((m) => ({ ...m, reason: m.headers["Whereabouts-DLQ-Reason"], text: new TextDecoder().decode(m.data) }));
}

export async function positionEvents(nc: NatsConnection, orgId: number) {
  // Moves and sightings (tracking publishes them apart), per asset, whichever form the message has.
  const messages = (await readStream(nc, STREAMS.TRACKING.name, `tracking.events.${orgId}.>`)).filter((m) => isPositionSubject(m.subject));
  return messages.flatMap((m) =>
    (positionEventsOf(m.subject, decodeJson(m.data)) ?? []).map(({ verb, ...event }) => ({ verb, event: event as AssetPositionEvent })),
  );
}
