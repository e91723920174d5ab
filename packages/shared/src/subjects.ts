/** Subjects, streams and durable names: defined here once, used everywhere. */
import { z } from "zod";

export const SERVICES = ["catalog", "tracking", "reporting"] as const;
export type ServiceName = (typeof SERVICES)[number];

/**
 * `STREAM_PREFIX`: the namespace of one stack on a broker that several stacks
 * share. With `blue`, streams are `blue_CATALOG`..., durables
 * `blue_tracking-scans`..., and every subject starts with `blue.` (RPC, events,
 * scans: `blue.scans.<org_id>.<source>`, MQTT topic `blue/scans/<org_id>/<source>`).
 * Subjects need it too: JetStream refuses two streams whose subjects overlap,
 * and two stacks answering the same RPC subjects would serve each other's
 * requests. Unset (the default): the names of DECISIONS.md, unchanged.
 *
 * Read here, when this module loads, rather than from each process's config:
 * consumer specs capture stream and durable names in module constants, which
 * are evaluated before any `main` could pass a value on. Every process of a
 * stack (services, npm start, the admin tools) reads the same variable.
 */
export const StreamPrefix = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,32}$/, "letters, digits, '_' and '-', at most 32")
  // `scans.>` (SCANS without a prefix) would overlap `scans.scans.>`.
  .refine((p) => p !== "scans", "`scans` would overlap the unprefixed SCANS stream")
  .optional();

function readStreamPrefix(raw: string | undefined): string {
  const parsed = StreamPrefix.safeParse(raw === "" ? undefined : raw);
  if (!parsed.success) throw new Error(`Invalid configuration:\n  STREAM_PREFIX: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data ?? "";
}

/** The stack's namespace on the broker ("" when STREAM_PREFIX is unset). */
export const STREAM_PREFIX = readStreamPrefix(process.env.STREAM_PREFIX);

const named = (name: string) => (STREAM_PREFIX ? `${STREAM_PREFIX}_${name}` : name);
/** A subject of this stack on the wire: the logical subject inside the namespace. */
const wire = (subject: string) => (STREAM_PREFIX ? `${STREAM_PREFIX}.${subject}` : subject);
/**
 * A wire subject in the terms of the contracts (`scans.<org_id>.<source>`):
 * consumers hand these to handlers, so parsers never see the namespace.
 */
export function logicalSubject(subject: string): string {
  return STREAM_PREFIX && subject.startsWith(`${STREAM_PREFIX}.`) ? subject.slice(STREAM_PREFIX.length + 1) : subject;
}
/** A subject (or filter) written in the contracts' terms, as it travels on this stack's broker. */
export const wireSubject = wire;

/** Request/reply: `<service>.<operation>`, queue group = service name. */
export const rpcSubject = (service: ServiceName, operation: string) => wire(`${service}.${operation}`);
export const PING_OPERATION = "ping";

export const STREAMS = {
  CATALOG: { name: named("CATALOG"), subjects: [wire("catalog.events.>")] },
  TRACKING: { name: named("TRACKING"), subjects: [wire("tracking.events.>")] },
  /** DECISIONS.md: SCANS captures `scans.>`. Stream subjects may not overlap, so
   * SCANS_DLQ holds `scans.dlq.>` by sourcing it from SCANS, and the scan
   * consumer skips that branch. */
  SCANS: { name: named("SCANS"), subjects: [wire("scans.>")] },
  SCANS_DLQ: { name: named("SCANS_DLQ"), sourceFilter: wire("scans.dlq.>") },
  /**
   * The deployment these streams belong to (deployment.ts): one message. A
   * stream rather than stream `metadata`, which nats-server only has from 2.10
   * (2.9 drops the field silently), and rather than a KV bucket, which would
   * need one more client package for one key.
   */
  DEPLOYMENT: { name: named("DEPLOYMENT"), subjects: [wire("whereabouts.deployment")] },
  /** Events a consumer refused (dead-letter.ts): `deadletter.<durable>`, the payload as it was, the reason in headers. */
  DEAD_LETTERS: { name: named("DEAD_LETTERS"), subjects: [wire("deadletter.>")] },
  /** Bulk uploads waiting for their job (uploads.ts): an object store bucket, which JetStream keeps in stream `OBJ_<bucket>`. */
  UPLOADS: { name: `OBJ_${named("uploads")}`, bucket: named("uploads") },
} as const;

/** The streams that carry the stack's data (every stream but DEPLOYMENT). */
export const DATA_STREAMS = [
  STREAMS.CATALOG.name,
  STREAMS.TRACKING.name,
  STREAMS.SCANS.name,
  STREAMS.SCANS_DLQ.name,
  STREAMS.DEAD_LETTERS.name,
  STREAMS.UPLOADS.name,
] as const;

export const catalogEventSubject = (orgId: number, entity: string, verb: string) =>
  wire(`catalog.events.${orgId}.${entity}.${verb}`);
/** A bulk job's catalog events in one message (contracts/catalog.ts, CatalogEventBatch). */
export const catalogBatchSubject = (orgId: number) => catalogEventSubject(orgId, "batch", "events");
export const trackingEventSubject = (orgId: number, entity: string, verb: string) =>
  wire(`tracking.events.${orgId}.${entity}.${verb}`);
/** Core NATS (not a stream): catalog's read-your-writes watermark per organization. */
export const catalogWrittenSubject = (orgId: number) => wire(`catalog.written.${orgId}`);
export const CATALOG_WRITTEN_ALL = wire("catalog.written.*");
export const scanSubject = (orgId: number | string, source: string) => wire(`scans.${orgId}.${source}`);
export const scanDlqSubject = (orgId: number | string) => wire(`scans.dlq.${orgId}`);
/** Where a consumer's refused events go (stream DEAD_LETTERS). */
export const deadLetterSubject = (durable: string) => wire(`deadletter.${durable}`);

export const DURABLES = {
  trackingCatalog: named("tracking-catalog"),
  trackingScans: named("tracking-scans"),
  /** Catalog's consumer of `asset.moved` (filtered; the unfiltered "catalog-tracking" it replaced is removed at boot). */
  catalogTracking: named("catalog-positions"),
  reportingCatalog: named("reporting-catalog"),
  reportingTracking: named("reporting-tracking"),
} as const;
