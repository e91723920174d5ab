/**
 * `soak` (only with --soak): 10 minutes (1 with --quick) of 200 API req/s,
 * open loop, mixed GET by id / list / PATCH / tag attach, while scans are
 * offered at 5,000 reads/s. Prints per-window (per-minute) p50, p99, 5xx and
 * the services' RSS to stderr and keeps them in the JSON.
 */
import { below, atMost } from "../bench-case.ts";
import { rowFromLoad, type BenchCase } from "../bench-context.ts";
import { drainWithMarker, PUBLISH_WINDOW } from "../ingest-run.ts";
import { formatMs } from "../results-table.ts";
import { paced } from "../scan-publisher.ts";
import { TAGS_PER_EVENT } from "../scan-workload.ts";
import { countersDelta, readIngestCounters, type IngestCounters } from "../tracking-counters.ts";

const target = { text: "0 5xx, p99 < 50 ms", criteria: [atMost("status_5xx", 0), below("p99", 50)] };

export const soakCase: BenchCase = {
  name: "soak",
  target,
  async run(ctx) {
    const { profile } = ctx;
    const startedAt = Date.now();
    const api = ctx.load.run({
      mode: "open",
      baseUrl: ctx.api.baseUrl,
      apiKey: ctx.api.apiKey,
      plan: { kind: "soak-mix", assetIds: ctx.roles.pool.map((a) => a.id), runId: ctx.runId },
      perSecond: profile.soakApiPerSecond,
      seconds: profile.soakSeconds,
      windowSeconds: profile.soakWindowSeconds,
    });
    let counters: IngestCounters | undefined;
    let completionPollErrors = 0;
    let drainFailure: string | undefined;
    let publishErrors = 0;
    let reads = 0;
    const readsByWindow: number[] = [];
    const ingest = ctx.ingest;
    if (ingest) {
      const before = await readIngestCounters(ingest.nc, ctx.orgId);
      await paced(profile.soakReadsPerSecond / TAGS_PER_EVENT, profile.soakSeconds, () => {
        const steady = ctx.fleet.steadyReads();
        const scan = ctx.scans.build(
          ctx.fleet.locations[steady.location]!,
          steady.assets.map((a) => ctx.fleet.assets[a]!),
        );
        reads += scan.assets.length;
        const w = Math.floor((Date.now() - startedAt) / 1000 / profile.soakWindowSeconds);
        readsByWindow[w] = (readsByWindow[w] ?? 0) + scan.assets.length;
        return ingest.js.publish(scan.subject, scan.data).catch(() => void publishErrors++);
      }, undefined, PUBLISH_WINDOW);
      // The API figures stand even when the scan backlog does not drain in time: that is one more error.
      if (reads > 0) {
        await drainWithMarker(ctx, ingest, before.readsRecorded + reads, profile.completionTimeoutMs).then(
          (done) => void (completionPollErrors = done.pollErrors),
          (err: unknown) => void (drainFailure = err instanceof Error ? err.message : String(err)),
        );
      }
      counters = countersDelta(before, await readIngestCounters(ingest.nc, ctx.orgId));
    }
    const report = await api;
    const status5xx = Object.entries(report.statusCodes)
      .filter(([code]) => code.startsWith("5"))
      .reduce((n, [, c]) => n + c, 0);
    const windows = (report.windows ?? []).map((w, i) => {
      const from = startedAt + w.fromSecond * 1000;
      const rss = ctx.rss?.peak(from, from + profile.soakWindowSeconds * 1000) ?? {};
      const line = `soak ${w.fromSecond}s+${profile.soakWindowSeconds}s: ${w.requests} req, p50 ${formatMs(w.latency.p50)}, p99 ${formatMs(w.latency.p99)}, 5xx ${w.status5xx}, non-2xx ${w.non2xx}, errors ${w.errors}, scan reads ${readsByWindow[i] ?? 0}, rss ${Object.entries(rss)
        .map(([name, mb]) => `${name} ${Math.round(mb)} MB`)
        .join(" ")}`;
      ctx.log(line);
      return { ...w, scan_reads_offered: readsByWindow[i] ?? 0, rss_peak_mb: rss };
    });
    return [
      rowFromLoad("soak", target, report, {
        metrics: { status_5xx: status5xx },
        errors: report.errors + publishErrors + (counters ? counters.deadLettered + counters.tagsUnresolved : 0) + (drainFailure ? 1 : 0),
        note: drainFailure ?? (ingest ? undefined : "no NATS: API load only"),
        details: {
          windows,
          scan_reads: reads,
          scan_publish_errors: publishErrors,
          tracking_counters_delta: counters,
          completion_poll_errors: completionPollErrors,
          scan_drain_failure: drainFailure,
        },
      }),
    ];
  },
};
