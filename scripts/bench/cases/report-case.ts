/**
 * `report`: GET /api/v1/reports/asset-locations, default page (-asset_last_seen),
 * after the ingest cases have scanned the assets; 4 connections, as a
 * latency case (32 would measure queueing, not the query).
 */
import { below } from "../bench-case.ts";
import { ReportPage } from "../api-client.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "p95 < 50 ms", criteria: [below("p95", 50)] };

export const reportCase: BenchCase = {
  name: "report",
  target,
  async run(ctx) {
    const page = await ctx.api.get("/api/v1/reports/asset-locations?limit=1", ReportPage);
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "report" },
      connections: ctx.profile.latencyConnections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [rowFromLoad("report", target, report, { details: { connections: ctx.profile.latencyConnections, report_rows: page.total_count } })];
  },
};
