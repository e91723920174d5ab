/**
 * `baseline`: the bare Fastify + pg server's GET by id (baseline-server.ts),
 * 32 connections, same load generator as the API cases: the reference their
 * "x baseline" ratio divides by.
 */
import { failedRow, skippedRow } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";

const target = { text: "(reference)", criteria: [] };

export const baselineCase: BenchCase = {
  name: "baseline",
  target,
  async run(ctx) {
    if (ctx.baselineError) return [failedRow("baseline", target, ctx.baselineError)];
    if (!ctx.baselineUrl) return [skippedRow("baseline", target, "no database to run it on (set BASELINE_DATABASE_URL)")];
    const report = await ctx.load.run({
      mode: "closed",
      baseUrl: ctx.baselineUrl,
      plan: { kind: "baseline-get", assetIds: ctx.seed.assets.map((a) => a.id) },
      connections: ctx.profile.connections,
      seconds: ctx.profile.apiSeconds,
      warmupSeconds: ctx.profile.warmupSeconds,
    });
    return [rowFromLoad("baseline", target, report, { details: { connections: ctx.profile.connections } })];
  },
};
