import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const ReportingEnv = BaseServiceEnv;

export type ReportingConfig = ReturnType<typeof loadReportingConfig>;

export function loadReportingConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(ReportingEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("reporting", env) };
}
