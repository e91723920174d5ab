/**
 * Ingestion counters: answered on `tracking.metrics`, logged when they move,
 * and exported to Prometheus (`whereabouts_tracking_*`, plus the shared
 * `whereabouts_dead_lettered_total{reason}`).
 */
import { Counter } from "prom-client";
import { DLQ_REASONS, type DlqReason, type Metrics } from "@whereabouts/shared";

export interface ScanMetrics {
  batches: number;
  /** Scans that produced history (first delivery of their key). */
  scansProcessed: number;
  /** Scans whose idempotency key was already recorded. */
  scansDuplicate: number;
  /** History rows written (resolved tag reads, one per asset per scan). */
  readsRecorded: number;
  /** Tags of good scans that resolved to no asset: counted and skipped. */
  tagsUnresolved: number;
  positionEventsPublished: number;
  deadLettered: Record<DlqReason, number>;
}

export function createScanMetrics(): ScanMetrics {
  return {
    batches: 0,
    scansProcessed: 0,
    scansDuplicate: 0,
    readsRecorded: 0,
    tagsUnresolved: 0,
    positionEventsPublished: 0,
    deadLettered: Object.fromEntries(DLQ_REASONS.map((r) => [r, 0])) as Record<DlqReason, number>,
  };
}

/** Mirrors each increment into Prometheus counters of the process registry. */
export function createScanCounters(metrics: Metrics) {
  const registers = [metrics.registry];
  const scans = new Counter({
    name: "whereabouts_tracking_scans_total",
    help: "Scan events by outcome: processed (history written) or duplicate (idempotency key seen before).",
    labelNames: ["outcome"] as const,
    registers,
  });
  const reads = new Counter({ name: "whereabouts_tracking_reads_recorded_total", help: "History rows written.", registers });
  const unresolved = new Counter({
    name: "whereabouts_tracking_tags_unresolved_total",
    help: "Tags of good scans that resolved to no asset (skipped).",
    registers,
  });
  const events = new Counter({
    name: "whereabouts_tracking_position_events_total",
    help: "asset.moved / asset.seen events published.",
    registers,
  });
  return {
    record(delta: { processed: number; duplicate: number; reads: number; unresolved: number; events: number }) {
      if (delta.processed) scans.inc({ outcome: "processed" }, delta.processed);
      if (delta.duplicate) scans.inc({ outcome: "duplicate" }, delta.duplicate);
      if (delta.reads) reads.inc(delta.reads);
      if (delta.unresolved) unresolved.inc(delta.unresolved);
      if (delta.events) events.inc(delta.events);
    },
    deadLettered(reason: DlqReason) {
      metrics.deadLettered.inc({ reason });
    },
  };
}
export type ScanCounters = ReturnType<typeof createScanCounters>;
