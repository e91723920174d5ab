import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const TrackingEnv = BaseServiceEnv;

export type TrackingConfig = ReturnType<typeof loadTrackingConfig>;

export function loadTrackingConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(TrackingEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("tracking", env) };
}
