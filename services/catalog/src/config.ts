import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const CatalogEnv = BaseServiceEnv;

export type CatalogConfig = ReturnType<typeof loadCatalogConfig>;

export function loadCatalogConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(CatalogEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("catalog", env) };
}
