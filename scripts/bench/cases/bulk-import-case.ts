/**
 * `bulk-import`: one CSV of `profile.bulkRows` new assets, one RFID tag each,
 * uploaded to POST /api/v1/assets/bulk and followed on GET /api/v1/jobs/<id>
 * every 50 ms. The rate is rows over the time from the upload's first byte
 * until the job is seen `succeeded` AND tracking's catalog replica has applied
 * every event of it (its durable has nothing pending: every tag resolves for
 * scans from then on); the job alone is in the note. Then, outside the timed window, it checks the
 * import end to end: every asset readable (the CSV export of the run's keys
 * has every row), and every tag resolvable by scans (each tag scanned once,
 * 1,000 tags an event, and tracking's counters record every read and no
 * unresolved tag). Peak RSS of every process is sampled (500 ms) from the
 * upload to the last check, and sampled once more at the end.
 */
import { atLeast, below, skippedRow } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import { DURABLES, encodeJson, scanSubject, STREAMS } from "@whereabouts/shared";
import { publishAll } from "../scan-publisher.ts";
import { countersDelta, readIngestCounters } from "../tracking-counters.ts";

const target = { text: "≥10,000 rows/s, every process < 250 MB", criteria: [atLeast("rate", 10_000), below("peak_mb", 250)] };
const TAGS_PER_SCAN = 1000;
const POLL_MS = 50;

interface JobView {
  id: number;
  status: string;
  rows_total: number | null;
  created: number;
  failed_rows: number;
  errors: unknown[];
}

async function poll<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not done within ${timeoutMs} ms${lastError ? ` (last error: ${lastError})` : ""}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

export const bulkImportCase: BenchCase = {
  name: "bulk-import",
  target,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("bulk-import", target, "needs NATS (NATS_URL) to scan the imported tags")];
    const { api } = ctx;
    const rows = ctx.profile.bulkRows;
    const prefix = `BLK-${ctx.runId}-`;
    const headers = { authorization: `Bearer ${api.apiKey}` };
    const lines = ["external_key,name,tags"];
    for (let i = 0; i < rows; i++) lines.push(`${prefix}${i},Bulk asset ${i},rfid:${prefix}${i}`);
    const csv = `${lines.join("\n")}\n`;
    ctx.log(`bulk-import: ${rows} rows, ${(csv.length / 1024 / 1024).toFixed(1)} MiB`);

    await ctx.rss?.sampleNow();
    const t0 = Date.now();
    const form = new FormData();
    form.append("file", new Blob([csv], { type: "text/csv" }), "assets.csv");
    form.append("mode", "create");
    const res = await fetch(`${api.baseUrl}/api/v1/assets/bulk`, { method: "POST", headers, body: form, signal: AbortSignal.timeout(120_000) });
    if (res.status !== 202) throw new Error(`upload: ${res.status} ${(await res.text()).slice(0, 300)}`);
    const location = res.headers.get("location")!;
    const uploadMs = Date.now() - t0;
    // A slow machine gives a slow figure, not a failed case: the wait grows with the file.
    const job = await poll(`job ${location}`, ctx.profile.completionTimeoutMs + rows * 5, async () => {
      const r = await fetch(`${api.baseUrl}${location}`, { headers });
      if (r.status !== 200) throw new Error(`${location}: ${r.status}`);
      const view = ((await r.json()) as { data: JobView }).data;
      return view.status === "succeeded" || view.status === "failed" ? view : undefined;
    });
    const jobMs = Date.now() - t0;
    if (job.status !== "succeeded" || job.created !== rows) {
      throw new Error(`job ${job.id} ended ${job.status}: created ${job.created} of ${rows}, errors ${JSON.stringify(job.errors.slice(0, 3))}`);
    }
    // End to end: tracking's catalog replica holds every tag (its durable has caught up with the stream).
    const jsm = await jetstreamManager(ctx.ingest.nc);
    await poll("tracking's catalog replica", ctx.profile.completionTimeoutMs + rows * 5, async () => {
      const [stream, consumer] = await Promise.all([jsm.streams.info(STREAMS.CATALOG.name), jsm.consumers.info(STREAMS.CATALOG.name, DURABLES.trackingCatalog)]);
      return consumer.num_pending === 0 && consumer.num_ack_pending === 0 && consumer.ack_floor.stream_seq >= stream.state.last_seq ? true : undefined;
    });
    const endToEndMs = Date.now() - t0;

    // Every asset readable: the run's keys through the CSV export (read-your-writes after `succeeded`).
    const e0 = Date.now();
    const exported = await fetch(`${api.baseUrl}/api/v1/assets?q=${encodeURIComponent(prefix)}`, { headers: { ...headers, accept: "text/csv" } });
    if (exported.status !== 200) throw new Error(`export: ${exported.status}`);
    const exportedRows = (await exported.text()).split("\r\n").filter((l) => l.startsWith(prefix)).length;
    const exportMs = Date.now() - e0;
    if (exportedRows !== rows) throw new Error(`export: ${exportedRows} of ${rows} imported assets listed`);

    // Every tag resolvable: each scanned once; tracking must record every read, none unresolved.
    const { nc, js } = ctx.ingest;
    const before = await readIngestCounters(nc, ctx.orgId);
    const s0 = Date.now();
    const location0 = ctx.seed.locations[0]!;
    const observedAt = new Date().toISOString();
    const scans = function* () {
      for (let from = 0; from < rows; from += TAGS_PER_SCAN) {
        const tags = [];
        for (let i = from; i < Math.min(rows, from + TAGS_PER_SCAN); i++) tags.push({ tag_type: "rfid", value: `${prefix}${i}` });
        yield { subject: scanSubject(ctx.orgId, "bench-bulk"), data: encodeJson({ event_id: `${prefix}scan-${from}`, observed_at: observedAt, location: { id: location0.id }, tags }) };
      }
    };
    await publishAll(js, scans(), 50);
    const delta = await poll("scans of the imported tags", ctx.profile.completionTimeoutMs, async () => {
      const d = countersDelta(before, await readIngestCounters(nc, ctx.orgId));
      return d.readsRecorded + d.tagsUnresolved >= rows || d.deadLettered > 0 ? d : undefined;
    });
    const scanMs = Date.now() - s0;
    if (delta.readsRecorded !== rows || delta.tagsUnresolved !== 0) {
      throw new Error(`scans: ${delta.readsRecorded} of ${rows} reads recorded, ${delta.tagsUnresolved} tags unresolved, ${delta.deadLettered} dead-lettered`);
    }

    const t1 = Date.now();
    await ctx.rss?.sampleNow();
    const peaks = ctx.rss?.peak(t0, t1 + 1000) ?? {};
    const peakMb = Math.max(0, ...Object.values(peaks));
    // The import alone (upload to succeeded) and the checks after it (export, scans of every tag).
    const importPeaks = ctx.rss?.peak(t0, t0 + endToEndMs) ?? {};
    const checkPeaks = ctx.rss?.peak(t0 + endToEndMs, t1 + 1000) ?? {};
    const mb = (p: Record<string, number>) =>
      Object.entries(p)
        .map(([name, v]) => `${name} ${Math.round(v)}`)
        .join(", ");
    const rate = (rows * 1000) / endToEndMs;
    return [
      {
        name: "bulk-import",
        status: "ok" as const,
        rate: { value: rate, unit: "rows/s" },
        note: `${rows} rows in ${(endToEndMs / 1000).toFixed(1)} s to tracking's replica; job succeeded at ${(jobMs / 1000).toFixed(1)} s (${Math.round((rows * 1000) / jobMs)} rows/s; upload ${uploadMs} ms); peak RSS (MB) during the import ${mb(importPeaks)}; during the checks ${mb(checkPeaks)}; export ${exportMs} ms, scans of every tag ${scanMs} ms`,
        metrics: { peak_mb: ctx.rss ? peakMb : Number.NaN, job_ms: jobMs, end_to_end_ms: endToEndMs },
        non2xx: 0,
        errors: 0,
        target,
        details: {
          rows,
          upload_ms: uploadMs,
          job_ms: jobMs,
          end_to_end_ms: endToEndMs,
          job_rate: (rows * 1000) / jobMs,
          export_ms: exportMs,
          scans_ms: scanMs,
          peak_rss_mb: Object.fromEntries(Object.entries(peaks).map(([k, v]) => [k, Math.round(v * 10) / 10])),
          import_peak_rss_mb: Object.fromEntries(Object.entries(importPeaks).map(([k, v]) => [k, Math.round(v * 10) / 10])),
          checks_peak_rss_mb: Object.fromEntries(Object.entries(checkPeaks).map(([k, v]) => [k, Math.round(v * 10) / 10])),
          reads_recorded: delta.readsRecorded,
        },
      },
    ];
  },
};
