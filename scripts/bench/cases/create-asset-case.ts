/**
 * `create-asset`: POST /api/v1/assets with one RFID tag, a unique
 * external_key and tag value per request, 32 in flight. The warm-up's
 * creates are writes too; only the measured window counts.
 */
import { atLeast } from "../bench-case.ts";
import { closedLoopCase } from "../bench-context.ts";

export const createAssetCase = closedLoopCase(
  "create-asset",
  { text: "≥1,000 req/s", criteria: [atLeast("rate", 1000)] },
  (ctx) => ({ kind: "create-asset", runId: ctx.runId }),
);
