/**
 * `read-under-ingest`: GET /api/v1/assets/{random id} at a fixed, moderate
 * rate (open loop, latency from each request's scheduled start) while scans
 * are offered at 20,000 reads/s; the API reads' p99. The ingest's own
 * reads/s and catch-up are kept in the details.
 */
import { below, skippedRow } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";
import { ingestDetails, ingestErrors, runIngest } from "../ingest-run.ts";
import { TAGS_PER_EVENT } from "../scan-workload.ts";

const target = { text: "p99 < 50 ms", criteria: [below("p99", 50)] };

export const readUnderIngestCase: BenchCase = {
  name: "read-under-ingest",
  target,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("read-under-ingest", target, "no NATS (set NATS_URL)")];
    const { profile, fleet } = ctx;
    const eventsPerSecond = profile.underIngestReadsPerSecond / TAGS_PER_EVENT;
    const scans = Array.from({ length: eventsPerSecond * profile.underIngestSeconds }, () => {
      const reads = fleet.steadyReads();
      return ctx.scans.build(
        fleet.locations[reads.location]!,
        reads.assets.map((a) => fleet.assets[a]!),
      );
    });
    const reads = ctx.load.run({
      mode: "open",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "get-asset", assetIds: ctx.seed.assets.map((a) => a.id) },
      perSecond: profile.underIngestApiPerSecond,
      seconds: profile.underIngestSeconds,
    });
    const ingest = await runIngest(ctx, ctx.ingest, scans, { eventsPerSecond, timeoutMs: profile.completionTimeoutMs });
    const report = await reads;
    return [
      rowFromLoad("read-under-ingest", target, report, {
        errors: report.errors + ingestErrors(ingest),
        note: `API reads at ${profile.underIngestApiPerSecond}/s offered; ingest reached ${Math.round(ingest.readsPerSecond)} reads/s`,
        details: {
          api_reads_per_s_offered: profile.underIngestApiPerSecond,
          ingest: { ...ingestDetails(ingest), reads_per_s: Math.round(ingest.readsPerSecond) },
        },
      }),
    ];
  },
};
