import { z } from "zod";
import { BaseServiceEnv, parseConfig, serviceDatabaseUrl } from "@whereabouts/shared";

export const CatalogEnv = BaseServiceEnv.extend({
  /** How often the outbox relay republishes events a crash left unpublished. */
  CATALOG_RELAY_INTERVAL_MS: z.coerce.number().int().positive().default(5000),
});

export type CatalogConfig = ReturnType<typeof loadCatalogConfig>;

export function loadCatalogConfig(env: Record<string, string | undefined> = process.env) {
  const parsed = parseConfig(CatalogEnv, env);
  return { ...parsed, databaseUrl: serviceDatabaseUrl("catalog", env) };
}
