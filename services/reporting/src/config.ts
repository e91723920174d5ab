import { z } from "zod";
import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const ReportingEnv = BaseServiceEnv.extend({
  /** Read-your-writes: how long a report request may wait for the consumers to catch up before 503. */
  REPORT_CATCHUP_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
  REPORTING_DB_POOL_MAX: z.coerce.number().int().positive().default(10),
});

export type ReportingConfig = ReturnType<typeof loadReportingConfig>;

export function loadReportingConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(ReportingEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("reporting", env) };
}
