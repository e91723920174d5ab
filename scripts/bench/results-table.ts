/**
 * The one table `npm run bench` prints: a row per case with its rate (or
 * measured value), latencies, failed requests, ratio to the baseline, target
 * and verdict. Pure formatting, covered by tests/bench-stats.test.ts.
 */
import type { CaseRow } from "./bench-case.ts";

export const TABLE_COLUMNS = ["case", "rate / value", "p50", "p95", "p99", "non-2xx / errors", "x baseline", "target", "met"] as const;

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function formatRate(value: number, unit: string): string {
  return `${integer.format(value)} ${unit}`;
}

/** Milliseconds with a precision that suits the magnitude; "-" when absent. */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined || Number.isNaN(ms)) return "-";
  if (ms >= 100) return `${integer.format(ms)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

export function formatMet(met: boolean | undefined, status: CaseRow["status"]): string {
  if (status === "skipped") return "skipped";
  if (status === "failed") return "FAILED";
  if (met === undefined) return "n/a";
  return met ? "yes" : "no";
}

/** Long texts (a failure's message) are cut in the table; the JSON keeps them whole. */
export const clip = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

export function rowCells(row: CaseRow): string[] {
  const value = row.rate ? formatRate(row.rate.value, row.rate.unit) : clip(row.summary ?? (row.status === "ok" ? "-" : (row.note ?? "-")));
  return [
    row.name,
    value,
    formatMs(row.latency?.p50),
    formatMs(row.latency?.p95),
    formatMs(row.latency?.p99),
    row.status === "skipped" ? "-" : `${integer.format(row.non2xx)} / ${integer.format(row.errors)}`,
    row.ratio === undefined ? "-" : `${row.ratio.toFixed(2)}x`,
    row.target.text,
    formatMet(row.met, row.status),
  ];
}

/** Left-aligned text columns with a header and a rule; numbers are already formatted. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

export function formatResultsTable(rows: readonly CaseRow[]): string {
  return formatTable(TABLE_COLUMNS, rows.map(rowCells));
}
