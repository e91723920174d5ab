/**
 * The process entry every service's `main.ts` runs: logger and metrics from
 * the parsed config, the ops server first (so the startup probe sees a live
 * process while /readyz stays 503), NATS, the deployment binding (streams of
 * another stack on another database are refused before anything touches
 * them), the streams, then the service; SIGINT/SIGTERM stop it in order
 * (service.ts) and close the ops server last, so probes answer until the end.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { bindDeploymentOrExit } from "./deployment.ts";
import { createLogger } from "./logger.ts";
import { createMetrics, type Metrics } from "./metrics.ts";
import { connectNats, ensureStreams } from "./nats.ts";
import { startOpsServer } from "./ops-server.ts";
import { onShutdownSignal, type RunningService } from "./service.ts";
import type { ServiceName } from "./subjects.ts";

/** What every service's config holds (BaseServiceEnv plus its database URL). */
export interface ServiceProcessConfig {
  LOG_LEVEL: string;
  OPS_PORT: number;
  NATS_URL: string;
  NATS_USER?: string | undefined;
  NATS_PASSWORD?: string | undefined;
  NATS_STREAM_REPLICAS: number;
  databaseUrl: string;
}

export interface ServiceContext {
  nc: NatsConnection;
  logger: Logger;
  metrics: Metrics;
}

export async function runServiceProcess<C extends ServiceProcessConfig>(options: {
  name: ServiceName | "gateway";
  config: C;
  /** The Postgres schema whose deployment id binds the streams. */
  schema: string;
  /** Create the streams (the domain services do; the gateway only checks the binding). */
  ensureStreams?: boolean;
  /** One NATS socket write per event-loop turn (connectNats' coalesceWrites). */
  coalesceNatsWrites?: boolean;
  start(context: ServiceContext): Promise<Pick<RunningService, "readiness" | "stop">>;
}): Promise<void> {
  const { name, config } = options;
  const logger = createLogger(name, config.LOG_LEVEL);
  const metrics = createMetrics({ service: name, processMetrics: true });
  const ops = await startOpsServer({ port: config.OPS_PORT, metrics, logger });
  const nc = await connectNats({
    url: config.NATS_URL,
    name,
    logger,
    user: config.NATS_USER,
    pass: config.NATS_PASSWORD,
    coalesceWrites: options.coalesceNatsWrites,
  });
  await bindDeploymentOrExit({ nc, databaseUrl: config.databaseUrl, schema: options.schema, logger, replicas: config.NATS_STREAM_REPLICAS });
  if (options.ensureStreams ?? true) await ensureStreams(nc, { replicas: config.NATS_STREAM_REPLICAS });
  const service = await options.start({ nc, logger, metrics });
  ops.setReadiness(service.readiness);
  logger.info(`${name} ready`);
  onShutdownSignal(logger, async () => {
    await service.stop(); // not ready from here on; ops stays up for the probes until the end
    await ops.close();
  });
}
