/** `list-assets`: GET /api/v1/assets?limit=50 at random offsets in the first 5 pages, 32 connections. */
import { atLeast, below } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "≥1,500 req/s, p99 < 50 ms", criteria: [atLeast("rate", 1500), below("p99", 50)] };

export const listAssetsCase: BenchCase = {
  name: "list-assets",
  target,
  async run(ctx) {
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "list-assets", limit: 50, pages: 5 },
      connections: ctx.profile.connections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [rowFromLoad("list-assets", target, report, { comparesToBaseline: true, details: { connections: ctx.profile.connections } })];
  },
};
