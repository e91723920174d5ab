/**
 * `create-asset`: POST /api/v1/assets with one RFID tag, a unique
 * external_key and tag value per request, 32 in flight. The warm-up's
 * creates are writes too; only the measured window counts.
 */
import { atLeast } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "≥1,000 req/s", criteria: [atLeast("rate", 1000)] };

export const createAssetCase: BenchCase = {
  name: "create-asset",
  target,
  async run(ctx) {
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "create-asset", runId: ctx.runId },
      connections: ctx.profile.connections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [rowFromLoad("create-asset", target, report, { comparesToBaseline: true, details: { connections: ctx.profile.connections } })];
  },
};
