/** Composition root of the tracking service: wires its dependencies by hand. */
import { createPool, startService, type Logger, type NatsConnection, type RunningService } from "@whereabouts/shared";

export interface TrackingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
}

export async function startTracking(deps: TrackingDeps): Promise<RunningService> {
  const pool = createPool(deps.databaseUrl);
  return startService({
    name: "tracking",
    nc: deps.nc,
    logger: deps.logger,
    handlers: {},
    close: [() => pool.end()],
  });
}
