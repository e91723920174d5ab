/**
 * `visibility`: scans offered at 5,000 reads/s; about 10 events a second
 * carry a probe asset (kept out of the other traffic) to a location it is
 * not at, and the time from publishing that event until
 * GET /api/v1/assets/{probe} shows the new location_id is one sample.
 * A probe not visible within 30 s counts as an error (and as 30 s); a poll
 * that fails (503) is retried and counted in the details.
 */
import { below, skippedRow } from "../bench-case.ts";
import { AssetReply } from "../api-client.ts";
import type { BenchCase } from "../bench-context.ts";
import { drainWithMarker, PUBLISH_WINDOW } from "../ingest-run.ts";
import { summarizeLatencies } from "../latency-stats.ts";
import { paced } from "../scan-publisher.ts";
import { TAGS_PER_EVENT, type BuiltScan } from "../scan-workload.ts";
import { countersDelta, readIngestCounters } from "../tracking-counters.ts";

const target = { text: "p99 < 1 s (publish → visible)", criteria: [below("p99", 1000)] };
const PROBE_TIMEOUT_MS = 30_000;
const POLL_MS = 20;

interface ProbeState {
  busy: boolean;
  locationIndex: number;
}

export const visibilityCase: BenchCase = {
  name: "visibility",
  target,
  async run(ctx) {
    const ingest = ctx.ingest;
    if (!ingest) return [skippedRow("visibility", target, "no NATS (set NATS_URL)")];
    const { fleet, scans, api, profile } = ctx;
    const eventsPerSecond = profile.visibilityReadsPerSecond / TAGS_PER_EVENT;
    const probeEvery = Math.max(1, Math.round(eventsPerSecond / profile.visibilityProbesPerSecond));
    const probes = new Map<number, ProbeState>(ctx.roles.probes.map((a) => [a.id, { busy: false, locationIndex: -1 }]));
    const latencies: number[] = [];
    const polls: Array<Promise<void>> = [];
    let timeouts = 0;
    let pollErrors = 0;
    let publishErrors = 0;
    let probesSkipped = 0;
    let reads = 0;

    const probe = (scan: BuiltScan, probeId: number, state: ProbeState, locationIndex: number) => {
      const t0 = performance.now();
      const ack = ingest.js.publish(scan.subject, scan.data);
      polls.push(
        (async () => {
          try {
            await ack;
          } catch {
            state.busy = false;
            return;
          }
          for (;;) {
            const located = await api.get(`/api/v1/assets/${probeId}`, AssetReply).then(
              (asset) => asset.data.location_id === scan.location.id,
              () => void pollErrors++,
            );
            if (located) {
              latencies.push(performance.now() - t0);
              break;
            }
            if (performance.now() - t0 > PROBE_TIMEOUT_MS) {
              timeouts++;
              latencies.push(performance.now() - t0);
              break;
            }
            await new Promise((r) => setTimeout(r, POLL_MS));
          }
          state.locationIndex = locationIndex;
          state.busy = false;
        })(),
      );
      return ack.catch(() => void publishErrors++);
    };

    const before = await readIngestCounters(ingest.nc, ctx.orgId);
    const startedAt = Date.now();
    await paced(eventsPerSecond, profile.visibilitySeconds, (n) => {
      if (n % probeEvery === 0) {
        const repeats = fleet.repeatReads(TAGS_PER_EVENT - 1);
        const free = [...probes].find(([, s]) => !s.busy && s.locationIndex !== repeats.location);
        if (free) {
          const [probeId, state] = free;
          state.busy = true;
          const probeAsset = ctx.roles.probes.find((a) => a.id === probeId)!;
          const scan = scans.build(fleet.locations[repeats.location]!, [...repeats.assets.map((a) => fleet.assets[a]!), probeAsset]);
          reads += scan.assets.length;
          return probe(scan, probeId, state, repeats.location);
        }
        probesSkipped++;
      }
      const steady = fleet.steadyReads();
      const scan = scans.build(
        fleet.locations[steady.location]!,
        steady.assets.map((a) => fleet.assets[a]!),
      );
      reads += scan.assets.length;
      return ingest.js.publish(scan.subject, scan.data).catch(() => void publishErrors++);
    }, undefined, PUBLISH_WINDOW);
    const publishedAt = Date.now();
    await Promise.all(polls);
    await drainWithMarker(ctx, ingest, before.readsRecorded + reads, profile.completionTimeoutMs);
    const counters = countersDelta(before, await readIngestCounters(ingest.nc, ctx.orgId));
    return [
      {
        name: "visibility",
        status: "ok",
        rate: { value: (reads * 1000) / Math.max(1, publishedAt - startedAt), unit: "reads/s" },
        latency: summarizeLatencies(latencies),
        metrics: {},
        // Probe polls the API failed (503 while busy): retried, and counted here.
        non2xx: pollErrors,
        errors: timeouts + publishErrors + counters.deadLettered + counters.tagsUnresolved,
        target,
        note: "rate is the offered scan load; latencies are publish → GET asset shows the new location",
        details: {
          probes: latencies.length,
          probes_timed_out: timeouts,
          probe_poll_errors: pollErrors,
          probes_skipped_none_free: probesSkipped,
          publish_errors: publishErrors,
          reads,
          tracking_counters_delta: counters,
        },
      },
    ];
  },
};
