/**
 * Scan rows as the scan service hands them to recordScans (scan-store.ts), at
 * whole seconds after a base instant, each taking the next ingestion order.
 * Used by tests only.
 */
import { epochMicros } from "@whereabouts/shared";
import type { ScanRow } from "../scans/scan-store.ts";

export function scanRows(base = Date.parse("2026-11-20T10:00:00.000Z")) {
  let ord = 0;
  /** `seconds` after the base, as the scan parser writes instants (UTC, microseconds). */
  const at = (seconds: number) => new Date(base + seconds * 1000).toISOString().replace("Z", "000Z");
  const row = (orgId: number, assetId: number, seconds: number, locationId: number): ScanRow => ({
    orgId,
    assetId,
    observedAt: at(seconds),
    observedUs: epochMicros(at(seconds)),
    locationId,
    ord: ord++,
    keep: true,
  });
  return { base, at, row };
}
