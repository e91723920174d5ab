/** Composition root of the catalog service: wires its dependencies by hand. */
import { createPool, startService, type Logger, type NatsConnection, type RunningService } from "@whereabouts/shared";

export interface CatalogDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
}

export async function startCatalog(deps: CatalogDeps): Promise<RunningService> {
  const pool = createPool(deps.databaseUrl);
  return startService({
    name: "catalog",
    nc: deps.nc,
    logger: deps.logger,
    handlers: {},
    close: [() => pool.end()],
  });
}
