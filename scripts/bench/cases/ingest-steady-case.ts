/**
 * `ingest-steady`: events of 10 tags where 9 reads repeat an asset at the
 * location it is already at and one moves an asset there, offered at the
 * target rate; reads/s from first publish until the last event's effects
 * (history, position, report) are visible through the API.
 */
import { atLeast, skippedRow } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";
import { ingestDetails, ingestErrors, ingestNote, runIngest } from "../ingest-run.ts";
import { TAGS_PER_EVENT } from "../scan-workload.ts";

const TARGET_READS_PER_S = 50_000;
const target = { text: "≥50,000 reads/s", criteria: [atLeast("rate", TARGET_READS_PER_S)] };

export const ingestSteadyCase: BenchCase = {
  name: "ingest-steady",
  target,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("ingest-steady", target, "no NATS (set NATS_URL)")];
    const events = (TARGET_READS_PER_S * ctx.profile.ingestSeconds) / TAGS_PER_EVENT;
    const scans = Array.from({ length: events }, () => {
      const reads = ctx.fleet.steadyReads();
      return ctx.scans.build(
        ctx.fleet.locations[reads.location]!,
        reads.assets.map((a) => ctx.fleet.assets[a]!),
      );
    });
    const run = await runIngest(ctx, ctx.ingest, scans, {
      eventsPerSecond: TARGET_READS_PER_S / TAGS_PER_EVENT,
      timeoutMs: ctx.profile.completionTimeoutMs,
    });
    return [
      {
        name: "ingest-steady",
        status: "ok",
        rate: { value: run.readsPerSecond, unit: "reads/s" },
        metrics: {},
        // Completion polls the API failed (503 while busy): retried, and counted here.
        non2xx: run.visible.pollErrors,
        errors: ingestErrors(run),
        target,
        note: ingestNote(run),
        details: ingestDetails(run),
      },
    ];
  },
};
