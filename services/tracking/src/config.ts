/** Tracking's configuration: one zod schema, parsed once at boot. */
import { z } from "zod";
import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";
import type { TrackingOptions } from "./app.ts";
import { DEFAULT_SCAN_BATCH_SIZE } from "./handlers/stream-consumers.ts";

export const TrackingEnv = BaseServiceEnv.extend({
  /** Scan messages per batch at most (one transaction each; see DEFAULT_SCAN_BATCH_SIZE). */
  TRACKING_SCAN_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(DEFAULT_SCAN_BATCH_SIZE),
  /** How long a fetched scan may stay unacked before JetStream redelivers it. */
  TRACKING_SCAN_ACK_WAIT_MS: z.coerce.number().int().min(500).default(15_000),
  /** Short: a delivery stranded on a stopped replica holds the catch-up ack floor until redelivered. */
  TRACKING_CATALOG_ACK_WAIT_MS: z.coerce.number().int().min(500).default(5000),
  TRACKING_CATALOG_BATCH_SIZE: z.coerce.number().int().min(1).max(5000).default(256),
  /** Bound on the catalog catch-up before a batch or a history read (then 503 / retry). */
  TRACKING_CATCH_UP_TIMEOUT_MS: z.coerce.number().int().min(100).default(3000),
  TRACKING_DB_POOL_SIZE: z.coerce.number().int().min(2).max(100).default(10),
  TRACKING_METRICS_LOG_INTERVAL_MS: z.coerce.number().int().min(0).default(60_000),
  /** How often history retention runs for organizations with history_retention_days. */
  TRACKING_RETENTION_INTERVAL_MS: z.coerce.number().int().min(1000).default(60_000),
  /** The share of wall time (percent) a retention pass may spend deleting: it pauses between its batches for the rest. */
  TRACKING_RETENTION_DUTY_PERCENT: z.coerce.number().int().min(1).max(100).default(25),
});

export type TrackingConfig = ReturnType<typeof loadTrackingConfig>;

export function loadTrackingConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(TrackingEnv, env);
  const options: TrackingOptions = {
    scanBatchSize: parsed.TRACKING_SCAN_BATCH_SIZE,
    scanAckWaitMs: parsed.TRACKING_SCAN_ACK_WAIT_MS,
    catalogAckWaitMs: parsed.TRACKING_CATALOG_ACK_WAIT_MS,
    catalogBatchSize: parsed.TRACKING_CATALOG_BATCH_SIZE,
    catchUpTimeoutMs: parsed.TRACKING_CATCH_UP_TIMEOUT_MS,
    dbPoolSize: parsed.TRACKING_DB_POOL_SIZE,
    metricsLogIntervalMs: parsed.TRACKING_METRICS_LOG_INTERVAL_MS,
    retentionIntervalMs: parsed.TRACKING_RETENTION_INTERVAL_MS,
    retentionDutyPercent: parsed.TRACKING_RETENTION_DUTY_PERCENT,
  };
  return { ...parsed, databaseUrl: serviceDatabaseUrl("tracking", env), options };
}
