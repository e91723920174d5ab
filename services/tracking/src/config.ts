/** Tracking's configuration: one zod schema, parsed once at boot. */
import { z } from "zod";
import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";
import { DEFAULT_SCAN_BATCH_SIZE } from "./handlers/stream-consumers.ts";

export interface TrackingOptions {
  scanBatchSize: number;
  scanAckWaitMs: number;
  /**
   * Short on purpose: catch-up waits on the CATALOG durable's ack floor, and a
   * message delivered to a replica that stopped or died holds that floor
   * until it is redelivered (scans and history reads wait meanwhile).
   */
  catalogAckWaitMs: number;
  catalogBatchSize: number;
  catchUpTimeoutMs: number;
  dbPoolSize: number;
  /** How often the ingestion counters are logged when they changed (0: never). */
  metricsLogIntervalMs: number;
  /** How often history retention runs (organizations with history_retention_days). */
  retentionIntervalMs: number;
  /** Percent of wall time a retention pass may be busy (history-retention.ts). */
  retentionDutyPercent: number;
}

/** What startTracking runs with unless told otherwise: the environment's defaults below too. */
export const DEFAULT_TRACKING_OPTIONS: TrackingOptions = {
  scanBatchSize: DEFAULT_SCAN_BATCH_SIZE,
  scanAckWaitMs: 15_000,
  catalogAckWaitMs: 5000,
  catalogBatchSize: 256,
  catchUpTimeoutMs: 3000,
  dbPoolSize: 10,
  metricsLogIntervalMs: 60_000,
  retentionIntervalMs: 60_000,
  retentionDutyPercent: 25,
};

const D = DEFAULT_TRACKING_OPTIONS;

export const TrackingEnv = BaseServiceEnv.extend({
  /** Scan messages per batch at most (one transaction each; see DEFAULT_SCAN_BATCH_SIZE). */
  TRACKING_SCAN_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(D.scanBatchSize),
  /** How long a fetched scan may stay unacked before JetStream redelivers it. */
  TRACKING_SCAN_ACK_WAIT_MS: z.coerce.number().int().min(500).default(D.scanAckWaitMs),
  /** Short: a delivery stranded on a stopped replica holds the catch-up ack floor until redelivered. */
  TRACKING_CATALOG_ACK_WAIT_MS: z.coerce.number().int().min(500).default(D.catalogAckWaitMs),
  TRACKING_CATALOG_BATCH_SIZE: z.coerce.number().int().min(1).max(5000).default(D.catalogBatchSize),
  /** Bound on the catalog catch-up before a batch or a history read (then 503 / retry). */
  TRACKING_CATCH_UP_TIMEOUT_MS: z.coerce.number().int().min(100).default(D.catchUpTimeoutMs),
  TRACKING_DB_POOL_SIZE: z.coerce.number().int().min(2).max(100).default(D.dbPoolSize),
  TRACKING_METRICS_LOG_INTERVAL_MS: z.coerce.number().int().min(0).default(D.metricsLogIntervalMs),
  /** How often history retention runs for organizations with history_retention_days. */
  TRACKING_RETENTION_INTERVAL_MS: z.coerce.number().int().min(1000).default(D.retentionIntervalMs),
  /** The share of wall time (percent) a retention pass may spend deleting: it pauses between its batches for the rest. */
  TRACKING_RETENTION_DUTY_PERCENT: z.coerce.number().int().min(1).max(100).default(D.retentionDutyPercent),
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
