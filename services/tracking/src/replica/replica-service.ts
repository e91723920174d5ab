/**
 * Keeps the catalog replica: parses CATALOG events at the boundary, keeps the
 * newest version of each entity per batch, applies the batch in one
 * transaction, and rebuilds from the stream when the database is behind it.
 */
import {
  CatalogEvent,
  catalogEventsOf,
  decodeJson,
  ensureConsumer,
  formatMicros,
  parseRfc3339,
  type ConsumerSpec,
  type BatchSettlement,
  type JsMsg,
  type Logger,
} from "@whereabouts/shared";
import type { JetStreamManager } from "@nats-io/jetstream";
import { DataPhaseError } from "../db/batch-isolation.ts";
import { inTransaction, query, type TrackingClient } from "../db/tracking-db.ts";
import {
  applyReplicaChanges,
  CATALOG_OFFSET,
  readOffset,
  type AssetRow,
  type LocationRow,
  type OrgSettingsRow,
  type ReplicaChanges,
  type ScanPointRow,
  type TagRow,
} from "./replica-store.ts";

export class InvalidCatalogEvent extends Error {
  override readonly name = "InvalidCatalogEvent";
}

function instant(text: string, field: string): string {
  const parsed = parseRfc3339(text);
  if (!parsed) throw new InvalidCatalogEvent(`${field} is not an RFC 3339 timestamp`);
  return formatMicros(parsed);
}
const instantOrNull = (text: string | null, field: string) => (text === null ? null : instant(text, field));

function parseEvent(json: unknown): CatalogEvent {
  const parsed = CatalogEvent.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new InvalidCatalogEvent(`schema: ${first ? `${first.path.join(".")}: ${first.message}` : "invalid"}`);
  }
  return parsed.data;
}

/** Parses one CATALOG message; throws InvalidCatalogEvent for poison. */
export function parseCatalogMessage(data: Uint8Array): CatalogEvent {
  const [event] = parseCatalogMessages("", data);
  return event!;
}

/**
 * A CATALOG message as its events: one, or a bulk job's batch (CatalogEventBatch,
 * by its subject in the contracts' terms). Any bad event makes the whole message poison.
 */
export function parseCatalogMessages(subject: string, data: Uint8Array): CatalogEvent[] {
  let json: unknown;
  try {
    json = decodeJson(data);
  } catch {
    throw new InvalidCatalogEvent("payload is not JSON");
  }
  const events = catalogEventsOf(subject, json);
  if (!events) throw new InvalidCatalogEvent("schema: not a catalog event batch of one organization");
  return events.map(parseEvent);
}

/** The replica rows one batch of events implies: newest version per entity. */
export function toReplicaChanges(events: Array<{ event: CatalogEvent; streamSeq: number }>): ReplicaChanges {
  const orgIds = new Set<number>();
  const locations = new Map<string, LocationRow>();
  const assets = new Map<string, AssetRow>();
  const tags = new Map<string, TagRow>();
  const embedded = new Map<string, TagRow>();
  const settings = new Map<string, OrgSettingsRow>();
  const scanPoints = new Map<string, ScanPointRow>();
  let streamSeq = 0;
  const newer = <T extends { version: number }>(map: Map<string, T>, key: string, row: T) => {
    const held = map.get(key);
    if (!held || row.version > held.version) map.set(key, row);
  };
  // Locations, scan points and tags are effective over an interval: kept as microsecond text, checked like any timestamp.
  const validity = (d: { valid_from: string; valid_to: string | null }, label = "") => ({
    valid_from: instant(d.valid_from, `${label}valid_from`),
    valid_to: instantOrNull(d.valid_to, `${label}valid_to`),
  });
  // Every replicated entity but settings is keyed by (org, id), soft-deleted and versioned alike.
  const versioned = (event: CatalogEvent, deletedAt: string | null) => ({
    org_id: event.org_id,
    id: event.entity_id,
    deleted_at: instantOrNull(deletedAt, "deleted_at"),
    version: event.entity_version,
  });
  const embed = (orgId: number, ownerType: "asset" | "location", ownerId: number, list: CatalogEvent["data"]) => {
    if (!("tags" in list)) return;
    for (const tag of list.tags) {
      embedded.set(`${orgId}:${tag.id}`, {
        org_id: orgId,
        id: tag.id,
        tag_type: tag.tag_type,
        value: tag.value,
        owner_type: ownerType,
        owner_id: ownerId,
        is_active: tag.is_active,
        ...validity(tag, "tag."),
        deleted_at: null,
        version: 0,
      });
    }
  };

  for (const { event, streamSeq: seq } of events) {
    streamSeq = Math.max(streamSeq, seq);
    orgIds.add(event.org_id);
    const key = `${event.org_id}:${event.entity_id}`;
    switch (event.entity) {
      case "location": {
        const d = event.data;
        newer(locations, key, { external_key: d.external_key, ...validity(d), ...versioned(event, d.deleted_at) });
        embed(event.org_id, "location", event.entity_id, d);
        break;
      }
      case "asset": {
        const d = event.data;
        newer(assets, key, versioned(event, d.deleted_at));
        embed(event.org_id, "asset", event.entity_id, d);
        break;
      }
      case "scan_point": {
        const d = event.data;
        newer(scanPoints, key, {
          source: d.source,
          antenna: d.antenna,
          location_id: d.location_id,
          ...validity(d),
          ...versioned(event, d.deleted_at),
        });
        break;
      }
      case "settings": {
        const d = event.data;
        newer(settings, key, {
          id: event.org_id,
          smoothing_window_s: d.smoothing_window_s,
          history_retention_days: d.history_retention_days,
          version: event.entity_version,
        });
        break;
      }
      case "tag": {
        const d = event.data;
        newer(tags, key, {
          tag_type: d.tag_type,
          value: d.value,
          owner_type: d.owner_type,
          owner_id: d.owner_id,
          is_active: d.is_active,
          ...validity(d),
          ...versioned(event, d.deleted_at),
        });
        break;
      }
    }
  }
  for (const key of tags.keys()) embedded.delete(key);
  return {
    orgIds: [...orgIds],
    settings: [...settings.values()],
    scanPoints: [...scanPoints.values()],
    locations: [...locations.values()],
    assets: [...assets.values()],
    tags: [...tags.values()],
    embeddedTags: [...embedded.values()],
    streamSeq,
  };
}

export interface ReplicaMetrics {
  catalogEventsApplied: number;
  catalogEventsRejected: number;
}

export function createReplicaService(deps: { db: TrackingClient; logger: Logger }) {
  const { db, logger } = deps;
  const metrics: ReplicaMetrics = { catalogEventsApplied: 0, catalogEventsRejected: 0 };

  /** Applies the messages in one transaction, then settles each of them (poison dead-lettered). */
  async function applyMessages(messages: JsMsg[], settle: BatchSettlement): Promise<void> {
    const started = performance.now();
    const events: Array<{ event: CatalogEvent; streamSeq: number }> = [];
    const poison: Array<{ msg: JsMsg; reason: string }> = [];
    const good: JsMsg[] = [];
    const parsedByMessage: Array<Array<{ event: CatalogEvent; streamSeq: number }>> = [];
    for (const msg of messages) {
      try {
        const parsed = parseCatalogMessages(msg.subject, msg.data).map((event) => ({ event, streamSeq: msg.seq }));
        parsedByMessage.push(parsed);
        events.push(...parsed);
        good.push(msg);
      } catch (err) {
        if (!(err instanceof InvalidCatalogEvent)) throw err;
        poison.push({ msg, reason: err.message });
      }
    }
    let changes: ReplicaChanges;
    try {
      changes = toReplicaChanges(events);
    } catch (err) {
      if (!(err instanceof InvalidCatalogEvent)) throw err;
      // A bad timestamp is its message's poison, not the batch's: only then is each message checked alone.
      events.length = 0;
      const kept = good.splice(0);
      kept.forEach((msg, i) => {
        try {
          toReplicaChanges(parsedByMessage[i]!);
          events.push(...parsedByMessage[i]!);
          good.push(msg);
        } catch (bad) {
          if (!(bad instanceof InvalidCatalogEvent)) throw bad;
          poison.push({ msg, reason: bad.message });
        }
      });
      changes = toReplicaChanges(events);
    }
    const parsedAt = performance.now();
    changes.streamSeq = Math.max(changes.streamSeq, ...messages.map((m) => m.seq));
    try {
      await inTransaction(db, (tx) => applyReplicaChanges(tx, changes));
    } catch (err) {
      throw new DataPhaseError(err instanceof Error ? err.message : String(err), { cause: err });
    }
    logger.debug({ messages: messages.length, events: events.length, parse_ms: Math.round(parsedAt - started), apply_ms: Math.round(performance.now() - parsedAt) }, "catalog batch applied");
    for (const msg of good) msg.ack();
    for (const { msg, reason } of poison) await settle.deadLetter(msg, "malformed_event", reason);
    metrics.catalogEventsApplied += good.length;
    metrics.catalogEventsRejected += poison.length;
  }

  /** A message that fails on its own against a healthy database: logged, counted, dead-lettered. */
  async function rejectMessage(msg: JsMsg, err: unknown, settle: BatchSettlement): Promise<void> {
    logger.error({ err, subject: msg.subject, stream_seq: msg.seq }, "catalog event could not be applied");
    metrics.catalogEventsRejected++;
    await settle.deadLetter(msg, "apply_failed", err instanceof Error ? err.message : String(err));
  }

  return { applyMessages, rejectMessage, metrics };
}
export type ReplicaService = ReturnType<typeof createReplicaService>;

/**
 * Rebuild from the stream: when the durable has acknowledged more than the
 * database recorded (an empty or restored database), the durable is replaced
 * by one that delivers the whole stream again. Version checks make the replay
 * harmless. An advisory lock keeps replicas starting together from racing.
 */
export async function prepareCatalogConsumer(deps: {
  db: TrackingClient;
  jsm: JetStreamManager;
  spec: ConsumerSpec;
  logger: Logger;
}): Promise<void> {
  const { db, jsm, spec, logger } = deps;
  await inTransaction(db, async (tx) => {
    await query(tx, `SELECT pg_advisory_xact_lock(hashtext('whereabouts:tracking:catalog-replica'))::text`);
    const applied = await readOffset(tx, CATALOG_OFFSET);
    let ackFloor = 0;
    try {
      ackFloor = (await jsm.consumers.info(spec.stream, spec.durable)).ack_floor.stream_seq;
    } catch {
      return; // No durable yet: it is created delivering everything.
    }
    if (ackFloor > applied) {
      logger.warn({ ack_floor: ackFloor, applied }, "catalog replica behind its durable; rebuilding from the stream");
      await jsm.consumers.delete(spec.stream, spec.durable);
      await ensureConsumer(jsm, spec);
    }
  });
}
