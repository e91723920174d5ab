/** `get-asset`: GET /api/v1/assets/{random seeded id}, 32 connections, closed loop. */
import { atLeast, below } from "../bench-case.ts";
import { closedLoopCase } from "../bench-context.ts";

export const getAssetCase = closedLoopCase(
  "get-asset",
  { text: "≥0.30x baseline, p99 < 25 ms", criteria: [atLeast("ratio", 0.3), below("p99", 25)] },
  (ctx) => ({ kind: "get-asset", assetIds: ctx.seed.assets.map((a) => a.id) }),
);
