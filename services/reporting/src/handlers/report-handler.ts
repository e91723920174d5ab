/** RPC endpoint `reporting.report.asset_locations` (GET/HEAD /api/v1/reports/asset-locations). */
import { REPORT_ASSET_LOCATIONS_OPERATION, type RpcHandler } from "@whereabouts/shared";
import type { ReportService } from "../report/report-service.ts";

export function reportHandlers(service: Pick<ReportService, "assetLocations">): Record<string, RpcHandler> {
  return {
    [REPORT_ASSET_LOCATIONS_OPERATION]: async (request) => ({
      status: 200,
      headers: {},
      body: await service.assetLocations(request),
    }),
  };
}
