/**
 * Each request's W3C trace: the caller's (`traceparent`) or a new one, with
 * the gateway's span. Read by the logger factory (every log line carries
 * trace_id) and by the forward route (the RPC carries `traceparent`).
 */
import type { IncomingMessage } from "node:http";
import { continueTrace, type TraceContext } from "@whereabouts/shared";

const traces = new WeakMap<IncomingMessage, TraceContext>();

export function traceOf(raw: IncomingMessage): TraceContext {
  let trace = traces.get(raw);
  if (!trace) {
    const sent = raw.headers.traceparent;
    trace = continueTrace(typeof sent === "string" ? sent : undefined);
    traces.set(raw, trace);
  }
  return trace;
}
