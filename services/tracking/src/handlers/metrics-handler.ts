/**
 * The ingestion and replica counters: answered on RPC `tracking.metrics`
 * (internal, not routed by the gateway) and logged periodically when they move.
 */
import type { Logger, RpcHandler } from "@whereabouts/shared";
import type { ReplicaMetrics } from "../replica/replica-service.ts";
import type { ScanMetrics } from "../scans/scan-metrics.ts";

export interface TrackingCounters {
  scans: ScanMetrics;
  replica: ReplicaMetrics;
}

export function metricsHandler(counters: TrackingCounters): RpcHandler {
  return async () => ({ status: 200, headers: {}, body: counters });
}

/** Logs the counters every `intervalMs` when they changed; a worker so shutdown stops it. */
export function startCounterLog(logger: Logger, counters: TrackingCounters, intervalMs: number) {
  let last = JSON.stringify(counters);
  const timer =
    intervalMs > 0
      ? setInterval(() => {
          const now = JSON.stringify(counters);
          if (now === last) return;
          last = now;
          logger.info({ counters }, "ingestion counters");
        }, intervalMs)
      : undefined;
  timer?.unref();
  return {
    async stop() {
      if (timer) clearInterval(timer);
    },
  };
}
