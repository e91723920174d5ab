/** Ingestion counters: logged per batch and answered on `tracking.metrics`. */
import { DLQ_REASONS, type DlqReason } from "@whereabouts/shared";

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
