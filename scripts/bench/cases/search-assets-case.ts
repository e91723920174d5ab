/** `search-assets`: GET /api/v1/assets?q=zephyr&limit=50 (about 1% of the seeded assets match), 32 connections. */
import { atLeast } from "../bench-case.ts";
import { closedLoopCase } from "../bench-context.ts";

export const searchAssetsCase = closedLoopCase(
  "search-assets",
  { text: "≥800 req/s", criteria: [atLeast("rate", 800)] },
  () => ({ kind: "search-assets", q: "zephyr", limit: 50 }),
  (ctx) => ({ zephyr_assets_seeded: ctx.seed.zephyrAssets }),
);
