/** RPC endpoints `reporting.report.asset_locations` (the report) and `reporting.location.summary` (GET /api/v1/locations/<id>/summary). */
import { LOCATION_SUMMARY_OPERATION, REPORT_ASSET_LOCATIONS_OPERATION, type RpcHandler } from "@whereabouts/shared";
import type { ReportService } from "../report/report-service.ts";
import type { SummaryService } from "../summary/summary-service.ts";

export function reportHandlers(service: Pick<ReportService, "assetLocations">, summaries?: SummaryService): Record<string, RpcHandler> {
  return {
    ...(summaries ? { [LOCATION_SUMMARY_OPERATION]: async (request) => ({ status: 200, headers: {}, body: { data: await summaries.summary(request) } }) } : {}),
    [REPORT_ASSET_LOCATIONS_OPERATION]: async (request) => ({
      status: 200,
      headers: {},
      body: await service.assetLocations(request),
    }),
  };
}
