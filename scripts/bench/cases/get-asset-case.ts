/** `get-asset`: GET /api/v1/assets/{random seeded id}, 32 connections, closed loop. */
import { atLeast, below } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "≥0.30x baseline, p99 < 25 ms", criteria: [atLeast("ratio", 0.3), below("p99", 25)] };

export const getAssetCase: BenchCase = {
  name: "get-asset",
  target,
  async run(ctx) {
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "get-asset", assetIds: ctx.seed.assets.map((a) => a.id) },
      connections: ctx.profile.connections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [rowFromLoad("get-asset", target, report, { comparesToBaseline: true, details: { connections: ctx.profile.connections } })];
  },
};
