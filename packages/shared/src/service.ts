/**
 * Process lifecycle shared by the three domain services: connect, serve RPC,
 * run stream consumers, and shut down in order on SIGINT/SIGTERM (stop taking
 * work, finish what is in flight, drain NATS, close pools).
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Metrics } from "./metrics.ts";
import { drainNats, natsConnected, serveRpc, type RpcHandler, type RpcServer } from "./nats.ts";
import { runReadinessChecks, type ReadinessCheck, type ReadinessReport } from "./ops-server.ts";
import type { ServiceName } from "./subjects.ts";
import { operationsOf } from "./contracts/operations.ts";

export interface Worker {
  /** Stop fetching, finish the batch in hand. */
  stop(): Promise<void>;
}

export interface RunningService {
  rpc: RpcServer;
  /** NATS connected and every check of the service passing; never ready once stopping. */
  readiness(): Promise<ReadinessReport>;
  stop(): Promise<void>;
}

export function startService(options: {
  name: ServiceName;
  nc: NatsConnection;
  logger: Logger;
  handlers: Record<string, RpcHandler>;
  workers?: Worker[];
  /** Closed last, after NATS has drained. */
  close?: Array<() => Promise<unknown>>;
  /** RPC counts and latencies go here. */
  metrics?: Metrics;
  /** Checked by `/readyz` besides the NATS connection, e.g. `database: () => db.$queryRawUnsafe("SELECT 1")`. */
  readinessChecks?: Record<string, ReadinessCheck>;
}): RunningService {
  const missing = unansweredOperations(options.name, options.handlers);
  if (missing.length) throw new Error(`${options.name} has no handler for ${missing.join(", ")}`);
  const rpc = serveRpc(options.nc, options.name, options.handlers, options.logger, { metrics: options.metrics });
  const checks: Record<string, ReadinessCheck> = { nats: () => natsConnected(options.nc), ...options.readinessChecks };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await rpc.stop();
      await Promise.all((options.workers ?? []).map((w) => w.stop()));
      await drainNats(options.nc);
      for (const close of options.close ?? []) await close();
    })());
  return {
    rpc,
    stop,
    async readiness() {
      if (stopping) return { ready: false, checks: { stopping: false } };
      return runReadinessChecks(checks);
    },
  };
}

/** The catalog's public operations of `service` that its handler table does not answer ("METHOD path (name)"). */
export function unansweredOperations(service: ServiceName, handlers: Readonly<Record<string, RpcHandler>>): string[] {
  return operationsOf(service)
    .filter((op) => !Object.hasOwn(handlers, op.name))
    .map((op) => `${op.method} ${op.path} (${op.name})`);
}

/**
 * Runs `stop` on SIGINT/SIGTERM, then exits 0 (1 when stopping failed, or did
 * not finish within `graceMs`: the process exits before the orchestrator's
 * SIGKILL, with a log line saying why).
 */
export function onShutdownSignal(logger: Logger, stop: () => Promise<void>, options: { graceMs?: number } = {}): void {
  const graceMs = options.graceMs ?? 20_000;
  const handler = (signal: string) => {
    logger.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      logger.error({ graceMs }, "shutdown did not finish within the grace period; exiting");
      process.exit(1);
    }, graceMs);
    timer.unref();
    stop().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
}
