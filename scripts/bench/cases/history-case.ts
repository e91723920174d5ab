/**
 * `history`: GET /api/v1/assets/{id}/history, default page, for the one asset
 * seeded with many history rows (100,000 in the full run); 4 connections.
 */
import { below, skippedRow } from "../bench-case.ts";
import { HistoryPage } from "../api-client.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "p95 < 20 ms", criteria: [below("p95", 20)] };

export const historyCase: BenchCase = {
  name: "history",
  target,
  async run(ctx) {
    const assetId = ctx.roles.history.id;
    const page = await ctx.api.get(`/api/v1/assets/${assetId}/history?limit=1`, HistoryPage);
    if (page.total_count === 0) return [skippedRow("history", target, "no history seeded (needs NATS)")];
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "history", assetId },
      connections: ctx.profile.latencyConnections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [
      rowFromLoad("history", target, report, {
        details: { connections: ctx.profile.latencyConnections, asset_id: assetId, history_rows: page.total_count },
      }),
    ];
  },
};
