/** RPC `tracking.metrics` (internal, not routed by the gateway): ingestion and replica counters. */
import type { RpcHandler } from "@whereabouts/shared";
import type { ReplicaMetrics } from "../replica/replica-service.ts";
import type { ScanMetrics } from "../scans/scan-metrics.ts";

export function metricsHandler(metrics: { scans: ScanMetrics; replica: ReplicaMetrics }): RpcHandler {
  return async () => ({ status: 200, headers: {}, body: metrics });
}
