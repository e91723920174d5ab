/** Tracking's wire shapes: the scan payload, history rows, position events, dead letters. */
import { z } from "zod";
import { Id, Timestamp } from "./common.ts";

/** RFC 3339 date-time with any offset and 0..9 fractional digits. */
export const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** An instant with microsecond precision: epoch milliseconds plus 0..999 µs. */
export interface MicroInstant {
  ms: number;
  micros: number;
}

const daysInMonth = (year: number, month: number) =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;

/** UTC years 1..9999: what RFC 3339 and Postgres both represent. */
const MIN_INSTANT_MS = Date.parse("0001-01-01T00:00:00.000Z");
const MAX_INSTANT_MS = Date.parse("9999-12-31T23:59:59.999Z");

/**
 * Parses RFC 3339 (any offset, 0..9 fractional digits) into a UTC instant,
 * truncating toward zero to microseconds. Null when the text is not RFC 3339
 * or names no real calendar instant (month 13, 30 February, hour 24, year 0)
 * or one outside UTC years 1..9999.
 */
export function parseRfc3339(text: string): MicroInstant | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offsetMinutes = 0;
  const zone = m[8]!;
  if (zone !== "Z" && zone !== "z") {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (zone[0] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const fraction = (m[7] ?? ".").slice(1).padEnd(6, "0").slice(0, 6);
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number(fraction.slice(0, 3)));
  const ms = date.getTime() - offsetMinutes * 60_000;
  if (!(ms >= MIN_INSTANT_MS && ms <= MAX_INSTANT_MS)) return null;
  return { ms, micros: Number(fraction.slice(3, 6)) };
}

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ`: what Postgres stores without rounding. */
export function formatMicros(instant: MicroInstant): string {
  const iso = new Date(instant.ms).toISOString();
  return `${iso.slice(0, 23)}${String(instant.micros).padStart(3, "0")}Z`;
}

const rfc3339Instant = (field: string) =>
  z.string().refine((text) => parseRfc3339(text) !== null, `${field} must be an RFC 3339 timestamp`);

const TagPart = {
  tag_type: z.string().min(1).max(255),
  value: z.string().min(1).max(255),
};

/** `{external_key}` | `{id}` | `{tag_type, value}` of a tag attached to a location. */
export const ScanLocation = z.union([
  z.object({ external_key: z.string().min(1).max(255) }).strict(),
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
    event_id: z.string().min(1).max(255).optional(),
    observed_at: rfc3339Instant("observed_at"),
    /** Absent: the location of the scan point mapping the subject's source and `antenna` (EXTENSIONS.md section 5). */
    location: ScanLocation.optional(),
    /** The reader's antenna; with `location` absent, picks the scan point (a source's null-antenna mapping is its default). */
    antenna: z.number().int().min(0).max(2147483647).optional(),
    tags: z.array(ScanTag).min(1).max(1000),
  })
  .strict();
export type ScanEvent = z.infer<typeof ScanEvent>;

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

/** At most this many positions per batch message (about 150 bytes each: well under max_payload). */
export const POSITION_BATCH_MAX = 1000;

/**
 * What tracking publishes: on `tracking.events.<org_id>.asset.positions`, the
 * newest state of each asset one ingestion batch touched, `moved` when its
 * location changed, `seen` when only its last-seen time advanced. One message
 * per organization per batch (chunked at POSITION_BATCH_MAX), instead of one
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

/** A position message as per-asset events, whichever form it came in (`verb` from the subject or the item). */
export function positionEventsOf(subject: string, json: unknown): Array<AssetPositionEvent & { verb: "moved" | "seen" }> | undefined {
  const verb = subject.slice(subject.lastIndexOf(".") + 1);
  if (verb === POSITION_BATCH_VERB) {
    const parsed = AssetPositionBatch.safeParse(json);
    if (!parsed.success) return undefined;
    return parsed.data.positions.map((p) => ({ ...p, version: 1 as const, org_id: parsed.data.org_id }));
  }
  if (verb !== "moved" && verb !== "seen") return undefined;
  const parsed = AssetPositionEvent.safeParse(json);
  return parsed.success ? [{ ...parsed.data, verb }] : undefined;
}
