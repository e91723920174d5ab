/** Composition root of the reporting service: wires its dependencies by hand. */
import { createPool, startService, type Logger, type NatsConnection, type RunningService } from "@whereabouts/shared";

export interface ReportingDeps {
  nc: NatsConnection;
  logger: Logger;
  databaseUrl: string;
}

export async function startReporting(deps: ReportingDeps): Promise<RunningService> {
  const pool = createPool(deps.databaseUrl);
  return startService({
    name: "reporting",
    nc: deps.nc,
    logger: deps.logger,
    handlers: {},
    close: [() => pool.end()],
  });
}
