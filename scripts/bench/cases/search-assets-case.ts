/** `search-assets`: GET /api/v1/assets?q=zephyr&limit=50 (about 1% of the seeded assets match), 32 connections. */
import { atLeast } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "≥800 req/s", criteria: [atLeast("rate", 800)] };

export const searchAssetsCase: BenchCase = {
  name: "search-assets",
  target,
  async run(ctx) {
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "search-assets", q: "zephyr", limit: 50 },
      connections: ctx.profile.connections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [
      rowFromLoad("search-assets", target, report, {
        comparesToBaseline: true,
        details: { connections: ctx.profile.connections, zephyr_assets_seeded: ctx.seed.zephyrAssets },
      }),
    ];
  },
};
