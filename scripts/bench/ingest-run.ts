/**
 * One stretch of scan ingestion: publish a list of events (paced at a rate,
 * or as fast as acks allow), then a marker event, and wait until the
 * marker's effects show through the API. Returns the times and tracking's
 * counter deltas, so the cases can state reads/s from first publish to
 * visible and count every read that was dead-lettered, unresolved or never
 * published.
 */
import { atLeast, skippedRow } from "./bench-case.ts";
import type { BenchCase, BenchContext, IngestAccess } from "./bench-context.ts";
import type { CaseName } from "./bench-options.ts";
import { waitForIngest, type CompletionTimes } from "./ingest-completion.ts";
import { paced, publishAll } from "./scan-publisher.ts";
import { TAGS_PER_EVENT, type BuiltScan, type FleetModel } from "./scan-workload.ts";
import { cpuBetween, type CpuSeconds } from "./cpu-meter.ts";
import { countersDelta, readIngestCounters, type IngestCounters } from "./tracking-counters.ts";

/** Acks outstanding before a paced publisher holds back. */
export const PUBLISH_WINDOW = 4000;

export interface IngestRun {
  events: number;
  reads: number;
  startedAt: number;
  /** When the last publish was acknowledged. */
  publishedAt: number;
  visible: CompletionTimes;
  publishErrors: number;
  counters?: IngestCounters;
  /** CPU seconds of the stack from first publish until visible (when the benchmark started the stack). */
  cpu?: CpuSeconds;
  /** Reads/s offered while publishing. */
  offeredReadsPerSecond: number;
  /** Reads/s from first publish until every effect was visible. */
  readsPerSecond: number;
}

export type IngestScope = Pick<BenchContext, "watch" | "orgId" | "markers" | "cpu">;

/**
 * Publishes the marker after everything else and waits until it, and so
 * all before it, is visible; `readsBefore` + `reads` is what tracking's
 * counter must reach before the marker (which adds one).
 */
export async function drainWithMarker(scope: IngestScope, ingest: IngestAccess, expectReads: number, timeoutMs: number): Promise<CompletionTimes> {
  const marker = scope.markers.next();
  await ingest.js.publish(marker.subject, marker.data);
  return waitForIngest(scope.watch, marker, { readsRecordedAtLeast: expectReads + marker.assets.length, timeoutMs });
}

export async function runIngest(
  ctx: IngestScope,
  ingest: IngestAccess,
  scans: readonly BuiltScan[],
  o: { eventsPerSecond?: number; timeoutMs: number },
): Promise<IngestRun> {
  if (scans.length === 0) throw new Error("nothing to publish");
  const reads = scans.reduce((n, s) => n + s.assets.length, 0);
  const before = await readIngestCounters(ingest.nc, ctx.orgId);
  const cpuBefore = await ctx.cpu?.snapshot();
  let publishErrors = 0;
  const startedAt = Date.now();
  if (o.eventsPerSecond) {
    let next = 0;
    await paced(
      o.eventsPerSecond,
      Number.POSITIVE_INFINITY,
      () => {
        const scan = scans[next++];
        if (!scan) return Promise.resolve();
        return ingest.js.publish(scan.subject, scan.data).catch(() => void publishErrors++);
      },
      () => next >= scans.length,
      PUBLISH_WINDOW,
    );
  } else {
    await publishAll(ingest.js, scans, 2000);
  }
  const publishedAt = Date.now();
  const visible = await drainWithMarker(ctx, ingest, before.readsRecorded + reads, o.timeoutMs);
  const cpuAfter = await ctx.cpu?.snapshot();
  const after = await readIngestCounters(ingest.nc, ctx.orgId);
  return {
    ...(cpuBefore && cpuAfter ? { cpu: cpuBetween(cpuBefore, cpuAfter) } : {}),
    events: scans.length,
    reads,
    startedAt,
    publishedAt,
    visible,
    publishErrors,
    counters: countersDelta(before, after),
    offeredReadsPerSecond: (reads * 1000) / Math.max(1, publishedAt - startedAt),
    readsPerSecond: (reads * 1000) / Math.max(1, visible.all - startedAt),
  };
}

/** Failed reads of a run: not published, dead-lettered, or not resolved to an asset. */
export function ingestErrors(run: IngestRun): number {
  return run.publishErrors + (run.counters ? run.counters.deadLettered + run.counters.tagsUnresolved : 0);
}

export function ingestDetails(run: IngestRun): Record<string, unknown> {
  const since = (t: number | undefined) => (t === undefined ? undefined : t - run.startedAt);
  return {
    events: run.events,
    reads: run.reads,
    publish_ms: run.publishedAt - run.startedAt,
    offered_reads_per_s: Math.round(run.offeredReadsPerSecond),
    visible_ms: {
      report: since(run.visible.report),
      position: since(run.visible.position),
      history: since(run.visible.history),
      counters: since(run.visible.counters),
      all: since(run.visible.all),
    },
    tracking_counters_delta: run.counters,
    cpu_seconds: run.cpu,
    cpu_ms_per_1k_reads: cpuPerThousandReads(run),
    completion_poll_errors: run.visible.pollErrors,
  };
}

/** The stack's CPU milliseconds per 1,000 reads of a run (steadier than its rate on a busy machine). */
export function cpuPerThousandReads(run: Pick<IngestRun, "cpu" | "reads">): number | undefined {
  return run.cpu ? Math.round((run.cpu.total! * 1_000_000) / Math.max(1, run.reads)) : undefined;
}

/** One line for the table's notes: how much was published, how fast, and when it showed. */
export function ingestNote(run: IngestRun): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const cpu = cpuPerThousandReads(run);
  return `${run.reads.toLocaleString("en-US")} reads offered at ${Math.round(run.offeredReadsPerSecond).toLocaleString("en-US")}/s over ${s(run.publishedAt - run.startedAt)}, all visible after ${s(run.visible.all - run.startedAt)}${cpu === undefined ? "" : `; stack CPU ${cpu} ms per 1,000 reads`}`;
}

/**
 * How much faster than a mix's target rate its reads are offered. Offered at
 * exactly the target, the rate (first publish to last effect visible) stays
 * under it whatever the stack does: the last reads still take their way
 * through the pipeline after the last publish (at 40,000 reads/s, 0.7 s of a
 * 3.7 s run). Offered faster, a stack that keeps up with the target shows it.
 */
export const OFFER_HEADROOM = 1.25;

/**
 * One stretch of a read mix: `seconds` (default `profile.ingestSeconds`)
 * worth of events at `readsPerSecond` (the target), drawn by `reads`, offered
 * OFFER_HEADROOM times faster, until every effect is visible.
 */
export function runMix(
  ctx: Pick<BenchContext, "profile" | "fleet" | "scans" | "watch" | "orgId" | "markers" | "cpu">,
  ingest: IngestAccess,
  readsPerSecond: number,
  reads: (fleet: FleetModel) => { location: number; assets: number[] },
  seconds = ctx.profile.ingestSeconds,
): Promise<IngestRun> {
  const events = Math.round((readsPerSecond * seconds) / TAGS_PER_EVENT);
  const scans = Array.from({ length: events }, () => {
    const drawn = reads(ctx.fleet);
    return ctx.scans.build(
      ctx.fleet.locations[drawn.location]!,
      drawn.assets.map((a) => ctx.fleet.assets[a]!),
    );
  });
  return runIngest(ctx, ingest, scans, { eventsPerSecond: (readsPerSecond * OFFER_HEADROOM) / TAGS_PER_EVENT, timeoutMs: ctx.profile.completionTimeoutMs });
}

/**
 * An ingest case: a mix (runMix) of `profile.sustainedIngestSeconds` whose
 * rate is reads/s from the first publish until the last event's effects are
 * visible through the API.
 */
export function ingestCase(
  name: CaseName,
  readsPerSecond: number,
  reads: (fleet: FleetModel) => { location: number; assets: number[] },
): BenchCase {
  const target = { text: `≥${readsPerSecond.toLocaleString("en-US")} reads/s`, criteria: [atLeast("rate", readsPerSecond)] };
  return {
    name,
    target,
    async run(ctx) {
      if (!ctx.ingest) return [skippedRow(name, target, "no NATS (set NATS_URL)")];
      const run = await runMix(ctx, ctx.ingest, readsPerSecond, reads, ctx.profile.sustainedIngestSeconds);
      return [
        {
          name,
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
}
