/** Tracking's wire shapes: the scan payload, history rows, position events, dead letters. */
import { z } from "zod";
import { Id, MAX_ID, Timestamp } from "./common.ts";
import { parseRfc3339, rfc3339Message } from "../rules/instant.ts";
import { trackingEventSubject } from "../subjects.ts";

const rfc3339Instant = (field: string) =>
  z.string().refine((text) => parseRfc3339(text) !== null, rfc3339Message(field));

/** Bounds of a scan's fields: ScanEvent's and acceptScanEvent's. */
const SCAN_TEXT_MAX = 255;
const SCAN_TAGS_MAX = 1000;
const ANTENNA_MAX = 2147483647;

const ScanText = z.string().min(1).max(SCAN_TEXT_MAX);

const TagPart = {
  tag_type: ScanText,
  value: ScanText,
};

/** `{external_key}` | `{id}` | `{tag_type, value}` of a tag attached to a location. */
export const ScanLocation = z.union([
  z.object({ external_key: ScanText }).strict(),
  z.object({ id: Id }).strict(),
  z.object(TagPart).strict(),
]);
export type ScanLocation = z.infer<typeof ScanLocation>;

export const ScanTag = z.object(TagPart).strict();
export type ScanTag = z.infer<typeof ScanTag>;

/** Scan event, as reader integrations publish it on `scans.<org_id>.<source>`. */
export const ScanEvent = z
  .object({
    /** Idempotency key per organization. */
    event_id: ScanText.optional(),
    observed_at: rfc3339Instant("observed_at"),
    /** Absent: the location of the scan point mapping the subject's source and `antenna` (EXTENSIONS.md section 5). */
    location: ScanLocation.optional(),
    /** The reader's antenna; with `location` absent, picks the scan point (a source's null-antenna mapping is its default). */
    antenna: z.number().int().min(0).max(ANTENNA_MAX).optional(),
    tags: z.array(ScanTag).min(1).max(SCAN_TAGS_MAX),
  })
  .strict();
export type ScanEvent = z.infer<typeof ScanEvent>;

const isText = (v: unknown): v is string => typeof v === "string" && v.length >= 1 && v.length <= SCAN_TEXT_MAX;
const isIntIn = (v: unknown, min: number, max: number) => typeof v === "number" && Number.isInteger(v) && v >= min && v <= max;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A strict `{tag_type, value}`. */
function isTagPart(v: unknown): boolean {
  if (!isObject(v)) return false;
  let keys = 0;
  for (const key in v) {
    if (key !== "tag_type" && key !== "value") return false;
    keys++;
  }
  return keys === 2 && isText(v.tag_type) && isText(v.value);
}

function isScanLocation(v: unknown): boolean {
  if (!isObject(v)) return false;
  let keys = 0;
  for (const key in v) {
    if (key !== "external_key" && key !== "id" && key !== "tag_type" && key !== "value") return false;
    keys++;
  }
  if (keys === 1) return "external_key" in v ? isText(v.external_key) : isIntIn(v.id, 1, MAX_ID);
  return isTagPart(v);
}

/**
 * ScanEvent's answer for a payload it would take as it is, without the copy
 * its parse makes: the payload itself when it certainly matches ScanEvent,
 * undefined when ScanEvent must decide (and name what is wrong). For a value
 * JSON.parse returned (plain objects and arrays). Tracking parses every scan:
 * through the schema, parsing was two thirds of a scan batch's parse step and
 * its copies of every tag a share of the garbage collector's work. The bounds
 * are ScanEvent's own constants; a test holds the two to the same verdicts.
 */
export function acceptScanEvent(json: unknown): ScanEvent | undefined {
  if (!isObject(json)) return undefined;
  let observed = false;
  let tags = false;
  for (const key in json) {
    const v = json[key];
    switch (key) {
      case "event_id":
        if (!isText(v)) return undefined;
        break;
      case "observed_at":
        if (typeof v !== "string" || parseRfc3339(v) === null) return undefined;
        observed = true;
        break;
      case "location":
        if (!isScanLocation(v)) return undefined;
        break;
      case "antenna":
        if (!isIntIn(v, 0, ANTENNA_MAX)) return undefined;
        break;
      case "tags":
        if (!Array.isArray(v) || v.length < 1 || v.length > SCAN_TAGS_MAX) return undefined;
        for (let i = 0; i < v.length; i++) if (!isTagPart(v[i])) return undefined;
        tags = true;
        break;
      default:
        return undefined;
    }
  }
  return observed && tags ? (json as ScanEvent) : undefined;
}

/** `<source>` of `scans.<org_id>.<source>`. */
export const SCAN_SOURCE = /^[A-Za-z0-9_-]+$/;

/** Header of a dead-lettered scan naming why it was refused (one of DLQ_REASONS). */
export const DLQ_REASON_HEADER = "Whereabouts-DLQ-Reason";
/** Human-readable detail of the refusal. */
export const DLQ_DETAIL_HEADER = "Whereabouts-DLQ-Detail";
/** Subject and SCANS stream sequence of the original message. */
export const DLQ_SUBJECT_HEADER = "Whereabouts-DLQ-Subject";
export const DLQ_SEQUENCE_HEADER = "Whereabouts-DLQ-Stream-Seq";

export const DLQ_REASONS = [
  "invalid_subject",
  "invalid_json",
  "invalid_schema",
  "unknown_org",
  "unknown_location",
  "unknown_scan_point",
  "no_resolved_tags",
  "processing_failed",
] as const;
export const DlqReason = z.enum(DLQ_REASONS);
export type DlqReason = z.infer<typeof DlqReason>;

export const AssetHistoryItem = z.object({
  event_observed_at: Timestamp,
  location_id: Id.nullable(),
  location_external_key: z.string().nullable(),
  duration_seconds: z.number().int().nullable(),
});
export type AssetHistoryItem = z.infer<typeof AssetHistoryItem>;

/**
 * Published on `tracking.events.<org_id>.asset.moved` when an asset's position
 * changes, and `.asset.seen` when only its last-seen time advances. Ordered per
 * asset by (observed_at, seq): consumers apply only what is newer. The newest
 * scan of an asset sets both its position and its last-seen time, so
 * observed_at is also `asset_last_seen`. After a crash an event may be sent
 * again (same event_id, or a `moved` for a position already announced as
 * `seen`): applying only newer states makes that harmless.
 */
export const AssetPositionEvent = z.object({
  version: z.literal(1),
  /** Also the Nats-Msg-Id: `<verb>:<org_id>:<asset_id>:<seq>`. */
  event_id: z.string(),
  org_id: Id,
  asset_id: Id,
  location_id: Id,
  /** RFC 3339 UTC with microseconds. */
  observed_at: Timestamp,
  /** The asset's own ingestion sequence of the scan: breaks ties on observed_at. */
  seq: z.number().int().nonnegative(),
  /** The asset's location before this change (null: first scan). */
  previous_location_id: Id.nullable().optional(),
});
export type AssetPositionEvent = z.infer<typeof AssetPositionEvent>;

/** At most this many positions per batch message a consumer accepts (about 180 bytes each: well under max_payload). */
export const POSITION_BATCH_MAX = 1000;
/**
 * How many positions tracking puts in one message: fewer than it may hold, so
 * that a message, as JSON text and as bytes, stays under 128 KiB (230 bytes an
 * item at most). Above that V8 places a string in its large-object space, a
 * fresh mapping each time: decoding a 1,000-item message (179 KB) took 1.3 ms
 * in each consumer against 0.02 ms for 700 items, and each one grew the old
 * generation towards its next full collection.
 */
export const POSITION_BATCH_ITEMS = 500;

/**
 * What tracking publishes: the newest state of each asset one ingestion batch
 * touched, `moved` when its location changed (on
 * `tracking.events.<org_id>.asset.positions`), `seen` when only its last-seen
 * time advanced (on `tracking.events.<org_id>.sightings.positions`: outside
 * `asset.*`, so catalog's consumer, which needs moves only, is never handed
 * the nine reads in ten that move nothing). Per organization per batch, one
 * message of each (chunked at POSITION_BATCH_ITEMS), instead of one
 * per asset: at 50,000 reads/s that is tens of messages a second rather than
 * tens of thousands. Each item reads like an AssetPositionEvent; consumers
 * also still accept the per-asset `asset.moved` / `asset.seen` form.
 */
export const AssetPositionItem = AssetPositionEvent.omit({ version: true, org_id: true }).extend({
  verb: z.enum(["moved", "seen"]),
});
export type AssetPositionItem = z.infer<typeof AssetPositionItem>;
export const AssetPositionBatch = z.object({
  version: z.literal(1),
  org_id: Id,
  positions: z.array(AssetPositionItem).min(1).max(POSITION_BATCH_MAX),
});
export type AssetPositionBatch = z.infer<typeof AssetPositionBatch>;
export const POSITION_BATCH_VERB = "positions";
/** The entity token of the subject that carries `seen` positions only (see AssetPositionBatch). */
export const SIGHTINGS_ENTITY = "sightings";
/** The subject of a batch message of `verb` positions: moves on `asset.positions`, sightings on `sightings.positions`. */
export const positionBatchSubject = (orgId: number, verb: AssetPositionItem["verb"]): string =>
  trackingEventSubject(orgId, verb === "moved" ? "asset" : SIGHTINGS_ENTITY, POSITION_BATCH_VERB);
const POSITION_SUBJECT = new RegExp(
  `^tracking\\.events\\.[^.]+\\.(asset\\.(moved|seen|${POSITION_BATCH_VERB})|${SIGHTINGS_ENTITY}\\.${POSITION_BATCH_VERB})$`,
);
/** A TRACKING subject (in contract terms) that carries positions: batches of moves or of sightings (positionBatchSubject), or the per-asset form. */
export const isPositionSubject = (subject: string): boolean => POSITION_SUBJECT.test(subject);
/**
 * Bytes a TRACKING consumer takes per batch (ConsumerSpec.maxBatchBytes), and
 * messages it pulls at once (pullMessages): a positions message carries up to
 * POSITION_BATCH_MAX items (about 150 KB), so a batch of 500 messages, the
 * count bound alone, was up to half a million positions, and a consumer that
 * fell behind held a thousand such messages decoded: reporting reached 423 MB
 * in the ingest benchmark. 4 MiB is still some 25,000 positions a transaction.
 */
export const TRACKING_CONSUMER_BATCH_BYTES = 4 * 1024 * 1024;
export const TRACKING_CONSUMER_PULL = 32;

/** A position message as per-asset events, whichever form it came in (`verb` from the subject or the item). */
export function positionEventsOf(subject: string, json: unknown): Array<AssetPositionEvent & { verb: "moved" | "seen" }> | undefined {
  const verb = subject.slice(subject.lastIndexOf(".") + 1);
  if (verb === POSITION_BATCH_VERB) {
    const parsed = AssetPositionBatch.safeParse(json);
    if (!parsed.success) return undefined;
    const orgId = parsed.data.org_id;
    // Built field by field: spreading zod's output objects took 3.7 us per item
    // (4.8 instead of 1.1 ms per 1,000-item message), and every scan batch's
    // positions pass here in both catalog and reporting.
    return parsed.data.positions.map((p) => ({
      version: 1 as const,
      event_id: p.event_id,
      org_id: orgId,
      asset_id: p.asset_id,
      location_id: p.location_id,
      observed_at: p.observed_at,
      seq: p.seq,
      previous_location_id: p.previous_location_id,
      verb: p.verb,
    }));
  }
  if (verb !== "moved" && verb !== "seen") return undefined;
  const parsed = AssetPositionEvent.safeParse(json);
  return parsed.success ? [{ ...parsed.data, verb }] : undefined;
}
