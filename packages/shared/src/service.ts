/**
 * Process lifecycle shared by the three domain services: connect, serve RPC,
 * run stream consumers, and shut down in order on SIGINT/SIGTERM (stop taking
 * work, finish what is in flight, drain NATS, close pools).
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { serveRpc, type RpcHandler, type RpcServer } from "./nats.ts";
import type { ServiceName } from "./subjects.ts";

export interface Worker {
  /** Stop fetching, finish the batch in hand. */
  stop(): Promise<void>;
}

export interface RunningService {
  rpc: RpcServer;
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
}): RunningService {
  const rpc = serveRpc(options.nc, options.name, options.handlers, options.logger);
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await rpc.stop();
      await Promise.all((options.workers ?? []).map((w) => w.stop()));
      if (!options.nc.isClosed()) await options.nc.drain();
      for (const close of options.close ?? []) await close();
    })());
  return { rpc, stop };
}

/** Runs `stop` on SIGINT/SIGTERM, then exits 0 (1 when stopping failed). */
export function onShutdownSignal(logger: Logger, stop: () => Promise<void>): void {
  const handler = (signal: string) => {
    logger.info({ signal }, "shutting down");
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", handler);
  process.once("SIGTERM", handler);
}
