/**
 * The boundary of scan ingestion: a SCANS message becomes a parsed scan, a
 * refusal with its dead-letter reason, or nothing to do (the `scans.dlq.`
 * branch that SCANS also captures). Pure: no I/O.
 */
import {
  acceptScanEvent,
  formatMicros,
  MAX_ID,
  parseRfc3339,
  SCAN_SOURCE,
  ScanEvent,
  type DlqReason,
  type ScanLocation,
  type ScanTag,
} from "@whereabouts/shared";

export interface ScanMessage {
  subject: string;
  data: Uint8Array;
  /** SCANS stream sequence. */
  seq: number;
  /** Stream timestamp: with seq, identifies the message across stream re-creation. */
  timestampNanos: bigint;
}

/** A scan without a location: resolved through the scan point of its source and antenna. */
export interface ScanPointRef {
  scan_point: { source: string; antenna: number | null };
}

export interface ParsedScan {
  kind: "scan";
  orgId: number;
  /** Idempotency key: `e:<event_id>`, or `s:<seq>:<timestamp ns>` without one. */
  key: string;
  /** UTC, truncated to microseconds: `YYYY-MM-DDTHH:MM:SS.ffffffZ`. */
  observedAt: string;
  /** The same instant in microseconds since the epoch (smoothing's arithmetic). */
  observedUs: number;
  location: ScanLocation | ScanPointRef;
  tags: ScanTag[];
}

export interface RefusedScan {
  kind: "refused";
  /** The org token of the DLQ subject: the org id, or "unknown". */
  org: string;
  reason: DlqReason;
  detail: string;
}

export type ScanParse = ParsedScan | RefusedScan | { kind: "skip" };

export const DLQ_PREFIX = "scans.dlq.";
const decoder = new TextDecoder("utf-8", { fatal: true });

function orgToken(token: string | undefined): number | null {
  if (!token || !/^[1-9]\d{0,9}$/.test(token)) return null;
  const id = Number(token);
  return id <= MAX_ID ? id : null;
}

export function parseScanMessage(msg: ScanMessage): ScanParse {
  if (msg.subject.startsWith(DLQ_PREFIX)) return { kind: "skip" };
  const tokens = msg.subject.split(".");
  const orgId = orgToken(tokens[1]);
  const refuse = (reason: DlqReason, detail: string): RefusedScan => ({
    kind: "refused",
    org: orgId === null ? "unknown" : String(orgId),
    reason,
    detail,
  });
  if (tokens.length !== 3 || tokens[0] !== "scans" || orgId === null || !SCAN_SOURCE.test(tokens[2]!)) {
    return refuse("invalid_subject", "subject must be scans.<org_id>.<source>");
  }
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(msg.data));
  } catch {
    return refuse("invalid_json", "payload is not valid UTF-8 JSON");
  }
  let event = acceptScanEvent(json);
  if (!event) {
    const parsed = ScanEvent.safeParse(json);
    if (!parsed.success) {
      const detail = parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join(".") || "(payload)"}: ${i.message}`)
        .join("; ");
      return refuse("invalid_schema", detail);
    }
    event = parsed.data;
  }
  const observed = parseRfc3339(event.observed_at)!;
  return {
    kind: "scan",
    orgId,
    key: event.event_id !== undefined ? `e:${event.event_id}` : `s:${msg.seq}:${msg.timestampNanos}`,
    observedAt: formatMicros(observed),
    observedUs: observed.ms * 1000 + observed.micros,
    location: event.location ?? { scan_point: { source: tokens[2]!, antenna: event.antenna ?? null } },
    tags: event.tags,
  };
}
