/**
 * What a benchmark case is and what it reports: a named function over the
 * shared context returning result rows, each with its target as data, so the
 * table, the JSON file and the met/not-met verdict are computed in one place.
 */
import type { LatencySummary } from "./latency-stats.ts";

/** A bound on one figure of a row: `rate`, `p50`, `p95`, `p99`, `ratio`, or a key of `metrics`. */
export interface Criterion {
  metric: string;
  op: ">=" | "<" | "<=";
  bound: number;
}

export const atLeast = (metric: string, bound: number): Criterion => ({ metric, op: ">=", bound });
export const below = (metric: string, bound: number): Criterion => ({ metric, op: "<", bound });
export const atMost = (metric: string, bound: number): Criterion => ({ metric, op: "<=", bound });

export interface Target {
  /** As printed in the table, e.g. "≥1,500 req/s, p99 < 50 ms". */
  text: string;
  criteria: Criterion[];
}

export interface CaseRow {
  name: string;
  status: "ok" | "failed" | "skipped";
  /** Why a case was skipped or failed, or what the figures mean when it helps. */
  note?: string;
  rate?: { value: number; unit: string };
  /** Milliseconds. */
  latency?: LatencySummary;
  /** Shown in the rate column when a row has no rate (sizes, memory). */
  summary?: string;
  /** Named figures the criteria may refer to (e.g. idle_mb, bytes_per_row). */
  metrics: Record<string, number>;
  non2xx: number;
  errors: number;
  /** This row's rate over the baseline's, set by the runner for rows that compare. */
  ratio?: number;
  comparesToBaseline?: boolean;
  target: Target;
  /** Set by `judge`: undefined when a figure it needs is missing. */
  met?: boolean;
  details: Record<string, unknown>;
}

export function metricOf(row: CaseRow, metric: string): number | undefined {
  switch (metric) {
    case "rate":
      return row.rate?.value;
    case "p50":
    case "p95":
    case "p99":
      return row.latency?.[metric];
    case "ratio":
      return row.ratio;
    default:
      return row.metrics[metric];
  }
}

function holds(value: number, c: Criterion): boolean {
  if (c.op === ">=") return value >= c.bound;
  if (c.op === "<") return value < c.bound;
  return value <= c.bound;
}

/**
 * Met when every criterion holds and nothing failed: a case with non-2xx
 * answers or errors does not meet its target, whatever its speed.
 */
export function judge(row: CaseRow): boolean | undefined {
  if (row.status === "skipped") return undefined;
  if (row.status === "failed") return false;
  let met = row.non2xx === 0 && row.errors === 0;
  for (const c of row.target.criteria) {
    const value = metricOf(row, c.metric);
    if (value === undefined || Number.isNaN(value)) return undefined;
    met = met && holds(value, c);
  }
  return met;
}

export function skippedRow(name: string, target: Target, note: string): CaseRow {
  return { name, status: "skipped", note, metrics: {}, non2xx: 0, errors: 0, target, details: {} };
}

export function failedRow(name: string, target: Target, err: unknown): CaseRow {
  const message = err instanceof Error ? err.message : String(err);
  return { name, status: "failed", note: message, metrics: {}, non2xx: 0, errors: 1, target, details: { error: message } };
}
