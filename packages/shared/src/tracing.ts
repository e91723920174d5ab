/**
 * W3C Trace Context (`traceparent`, version 00): the gateway continues a
 * caller's trace or starts one, passes it to the services in the NATS
 * `traceparent` header, and every log line of the request carries `trace_id`,
 * so one request can be followed across processes.
 */
import { randomHex as randomHexBytes } from "./random.ts";

export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  traceId: string;
  /** 16 lowercase hex digits, not all zero: the caller's span. */
  spanId: string;
  /** 2 hex digits; bit 0 is "sampled". */
  flags: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/**
 * Parses a `traceparent` header; undefined when it is absent or invalid (the
 * receiver then starts a new trace, as the spec asks). Later versions may
 * append fields; version 00 is exactly four.
 */
export function parseTraceparent(header: string | undefined | null): TraceContext | undefined {
  if (typeof header !== "string") return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, flags };
}

export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.flags}`;
}

function randomHex(bytes: number, zero: string): string {
  for (;;) {
    const hex = randomHexBytes(bytes);
    if (hex !== zero) return hex;
  }
}

export const newSpanId = (): string => randomHex(8, ZERO_SPAN);

/** A new sampled trace: `00-<32 hex>-<16 hex>-01`. */
export function newTrace(): TraceContext {
  return { traceId: randomHex(16, ZERO_TRACE), spanId: newSpanId(), flags: "01" };
}

/**
 * The context to send downstream: the incoming trace with a new span id (this
 * hop), or a new trace when the incoming header is absent or invalid.
 */
export function continueTrace(header: string | undefined | null): TraceContext {
  const parent = parseTraceparent(header);
  return parent ? { ...parent, spanId: newSpanId() } : newTrace();
}
