/**
 * When has ingestion caught up? The last event published is the marker (see
 * MarkerScans): the benchmark polls the public API until all three of its
 * effects show (the report's asset_last_seen and location, the asset's
 * position, its newest history row) and, where NATS is reachable, until
 * tracking's counters have recorded every read published. Never a fixed
 * sleep. The marker must change its asset's position, or the position
 * check would pass at once.
 */
import { AssetReply, HistoryPage, ReportPage, type ApiClient } from "./api-client.ts";
import type { BuiltScan } from "./scan-workload.ts";
import { readIngestCounters, type IngestCounters } from "./tracking-counters.ts";
import type { NatsConnection } from "@whereabouts/shared";

export interface CompletionTimes {
  /** Date.now() when each effect was first seen, and when all were. */
  report: number;
  position: number;
  history: number;
  counters?: number;
  all: number;
  counterSnapshot?: IngestCounters;
  /** Polls that failed (a 503 while the services are busy) and were retried. */
  pollErrors: number;
}

export interface CompletionWatch {
  api: ApiClient;
  orgId: number;
  nc?: NatsConnection;
}

const POLL_MS = 50;

export async function waitForIngest(
  watch: CompletionWatch,
  marker: BuiltScan,
  expect: { readsRecordedAtLeast?: number; timeoutMs: number },
): Promise<CompletionTimes> {
  const markerMs = Date.parse(marker.observedAt);
  const first = marker.assets[0]!;
  const reportPath = `/api/v1/reports/asset-locations?limit=200&${marker.assets.map((a) => `asset_id=${a.id}`).join("&")}`;
  const seen: Partial<Record<"report" | "position" | "history" | "counters", number>> = {};
  let counterSnapshot: IngestCounters | undefined;
  const wantCounters = watch.nc !== undefined && expect.readsRecordedAtLeast !== undefined;
  const deadline = Date.now() + expect.timeoutMs;
  let pollErrors = 0;
  let lastError = "";
  // A failed poll is retried until the deadline: busy services may answer 503.
  const attempt = (check: Promise<void>) =>
    check.catch((err: unknown) => {
      pollErrors++;
      lastError = err instanceof Error ? err.message : String(err);
    });
  for (;;) {
    const checks: Array<Promise<void>> = [];
    if (seen.report === undefined) {
      checks.push(
        watch.api.get(reportPath, ReportPage).then((page) => {
          const fresh = page.data.filter((r) => Date.parse(r.asset_last_seen) >= markerMs && r.location_id === marker.location.id);
          if (fresh.length === marker.assets.length) seen.report = Date.now();
        }),
      );
    }
    if (seen.position === undefined) {
      checks.push(
        watch.api.get(`/api/v1/assets/${first.id}`, AssetReply).then((asset) => {
          if (asset.data.location_id === marker.location.id) seen.position = Date.now();
        }),
      );
    }
    if (seen.history === undefined) {
      checks.push(
        watch.api.get(`/api/v1/assets/${first.id}/history?limit=1`, HistoryPage).then((page) => {
          const newest = page.data[0];
          if (newest && Date.parse(newest.event_observed_at) >= markerMs) seen.history = Date.now();
        }),
      );
    }
    if (wantCounters && seen.counters === undefined) {
      checks.push(
        readIngestCounters(watch.nc!, watch.orgId).then((c) => {
          counterSnapshot = c;
          if (c.readsRecorded >= expect.readsRecordedAtLeast!) seen.counters = Date.now();
        }),
      );
    }
    await Promise.all(checks.map(attempt));
    const { report, position, history, counters } = seen;
    if (report !== undefined && position !== undefined && history !== undefined && (!wantCounters || counters !== undefined)) {
      return { report, position, history, counters, all: Math.max(report, position, history, counters ?? 0), counterSnapshot, pollErrors };
    }
    if (Date.now() > deadline) {
      const effects: Array<keyof typeof seen> = ["report", "position", "history", ...(wantCounters ? (["counters"] as const) : [])];
      const missing = effects.filter((k) => seen[k] === undefined);
      const recorded = counterSnapshot ? ` (tracking recorded ${counterSnapshot.readsRecorded} of ${expect.readsRecordedAtLeast} reads)` : "";
      const failing = pollErrors ? `; ${pollErrors} polls failed, last: ${lastError}` : "";
      throw new Error(`ingest effects not visible within ${expect.timeoutMs / 1000} s: ${missing.join(", ")} still behind${recorded}${failing}`);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
