/** `list-assets`: GET /api/v1/assets?limit=50 at random offsets in the first 5 pages, 32 connections. */
import { atLeast, below } from "../bench-case.ts";
import { closedLoopCase } from "../bench-context.ts";

export const listAssetsCase = closedLoopCase(
  "list-assets",
  { text: "≥1,500 req/s, p99 < 50 ms", criteria: [atLeast("rate", 1500), below("p99", 50)] },
  () => ({ kind: "list-assets", limit: 50, pages: 5 }),
);
