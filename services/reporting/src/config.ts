import { z } from "zod";
import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const ReportingEnv = BaseServiceEnv.extend({
  /** Read-your-writes: how long a report request may wait for the consumers to catch up before 503. */
  REPORT_CATCHUP_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
  REPORTING_DB_POOL_MAX: z.coerce.number().int().positive().default(10),
  /** Partner events (GET /api/v1/events) are kept this long; an older cursor is 410. Default 7 days. */
  EVENT_RETENTION_S: z.coerce.number().int().positive().default(7 * 24 * 3600),
  /** true: webhooks may target private, loopback and link-local addresses (tests, closed networks). */
  WEBHOOK_ALLOW_PRIVATE: z.enum(["true", "false"]).default("false").transform((v) => v === "true"),
  /** Webhook requests in flight per reporting replica, and per webhook. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().positive().default(1024),
  WEBHOOK_TARGET_CONCURRENCY: z.coerce.number().int().positive().default(32),
  /** A delivery is delivered on a 2xx within this long (EXTENSIONS.md: 10 s). */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().max(60_000).default(10_000),
});

export type ReportingConfig = ReturnType<typeof loadReportingConfig>;

export function loadReportingConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(ReportingEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("reporting", env) };
}
