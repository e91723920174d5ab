/**
 * `admin assets import --org <id> <file.csv> [--mode upsert|create] [--on-error abort|skip]`:
 * an operator's bulk upload (EXTENSIONS.md section 3), followed to its end.
 *
 * It reaches catalog the way the gateway forwards an upload: the file streams
 * into the stack's uploads bucket (JetStream object store), then `asset.bulk`
 * queues the job and `job.get` follows it, over NATS request/reply with a
 * principal of the organization. The CLI runs next to the stack with its
 * broker and database settings (the identity database is how it checks the
 * organization, as every other command does), so it needs no API key, no
 * gateway and no rate-limit budget; and it never touches catalog's tables:
 * the catalog's own rules and job worker do the import (ARCHITECTURE.md rule 1).
 *
 * Output: on a terminal, a progress bar (rows/s, ETA) redrawn in place; piped,
 * one JSON line per change of progress. The last line is always the job as
 * `GET /api/v1/jobs/<id>` shows it. Exit status 0 when the job succeeded,
 * 1 when it failed (or could not start), 2 on a bad command line.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { z } from "zod";
import { callRpc, newRequestId, openUploads, rpcSubject, type NatsConnection, type RpcRequest } from "@whereabouts/shared";
import { BULK_BODY_LIMIT_BYTES } from "../bulk/bulk-upload.ts";

export interface AssetImportCommand {
  command: "assets import";
  orgId: number;
  file: string;
  mode: "upsert" | "create";
  onError: "abort" | "skip";
}

export const BulkJob = z
  .object({
    id: z.number().int(),
    kind: z.string(),
    status: z.enum(["queued", "running", "succeeded", "failed"]),
    rows_total: z.number().int().nullable(),
    rows_done: z.number().int(),
    created: z.number().int(),
    updated: z.number().int(),
    unchanged: z.number().int(),
    failed_rows: z.number().int(),
    errors: z.array(z.object({ row: z.number().int(), field: z.string(), code: z.string(), message: z.string() })),
  })
  .passthrough();
export type BulkJob = z.infer<typeof BulkJob>;

const JobReply = z.object({ data: BulkJob });
const ErrorReply = z.object({
  error: z.object({ type: z.string(), detail: z.string().optional(), fields: z.array(z.object({ field: z.string(), message: z.string() })).optional() }),
});

/** The import failed before or while its job ran; the message is for the operator. */
export class ImportFailed extends Error {
  override readonly name = "ImportFailed";
}

/** What one look at the job shows, with the rate and ETA of its current phase. */
export interface ImportProgress {
  job_id: number;
  status: BulkJob["status"];
  /** `checking` reads every row against the rules; `writing` writes them (rows_total known). */
  phase: "queued" | "checking" | "writing" | "done";
  rows_done: number;
  rows_total: number | null;
  rows_per_s: number | null;
  eta_s: number | null;
}

/** Rate and ETA over the current phase: from its first sample to now. */
export function createProgressMeter(now: () => number = () => performance.now()) {
  let phase: ImportProgress["phase"] | undefined;
  let start = { at: 0, rows: 0 };
  return (job: BulkJob): ImportProgress => {
    const current: ImportProgress["phase"] =
      job.status === "queued" ? "queued" : job.status === "running" ? (job.rows_total === null ? "checking" : "writing") : "done";
    const at = now();
    if (current !== phase) {
      phase = current;
      start = { at, rows: job.rows_done };
    }
    const seconds = (at - start.at) / 1000;
    const rate = seconds > 0 && job.rows_done > start.rows ? (job.rows_done - start.rows) / seconds : null;
    const eta = current === "writing" && rate && job.rows_total !== null ? Math.max(0, (job.rows_total - job.rows_done) / rate) : null;
    return {
      job_id: job.id,
      status: job.status,
      phase: current,
      rows_done: job.rows_done,
      rows_total: job.rows_total,
      rows_per_s: rate === null ? null : Math.round(rate),
      eta_s: eta === null ? null : Math.ceil(eta),
    };
  };
}

/** One line of the terminal's bar, e.g. `writing [#####.....]  50%  50,000/100,000 rows  12,000 rows/s  ETA 5 s`. */
export function formatProgressBar(p: ImportProgress, width = 30): string {
  const n = (v: number) => v.toLocaleString("en-US");
  if (p.phase === "queued") return `job ${p.job_id} queued`;
  const fraction = p.phase === "writing" && p.rows_total ? Math.min(1, p.rows_done / p.rows_total) : p.phase === "done" ? 1 : 0;
  const filled = Math.round(fraction * width);
  const bar = `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
  const rows = p.rows_total === null ? `${n(p.rows_done)} rows` : `${n(p.rows_done)}/${n(p.rows_total)} rows`;
  const rate = p.rows_per_s === null ? "" : `  ${n(p.rows_per_s)} rows/s`;
  const eta = p.eta_s === null ? "" : `  ETA ${p.eta_s} s`;
  return `${p.phase.padEnd(8)} ${bar} ${String(Math.round(fraction * 100)).padStart(3)}%  ${rows}${rate}${eta}`;
}

export interface ImportOutput {
  /** A terminal: the bar, redrawn in place; otherwise JSON lines. */
  tty: boolean;
  write(text: string): void;
}

const POLL_MS = 250;

/**
 * Uploads the file, queues the job and follows it to its end, writing
 * progress to `out`; returns the finished job. An RPC that catalog does not
 * answer is retried until `followTimeoutMs` passes without an answer (a
 * catalog restart mid-job is survived: the job resumes there).
 */
export async function importAssets(
  nc: NatsConnection,
  cmd: AssetImportCommand,
  out: ImportOutput,
  options: { rpcTimeoutMs?: number; followTimeoutMs?: number } = {},
): Promise<BulkJob> {
  const rpcTimeoutMs = options.rpcTimeoutMs ?? 10_000;
  const size = (await stat(cmd.file).catch(() => undefined))?.size;
  if (size === undefined) throw new ImportFailed(`cannot read ${cmd.file}`);
  if (size > BULK_BODY_LIMIT_BYTES) throw new ImportFailed(`${cmd.file} is ${size} bytes; the limit is ${BULK_BODY_LIMIT_BYTES} (64 MiB)`);

  const envelope = (operation: string, params: Record<string, string>, body?: unknown): RpcRequest => ({
    request_id: newRequestId(),
    principal: { key_id: 0, org_id: cmd.orgId, scopes: ["assets:write"] },
    method: body === undefined ? "GET" : "POST",
    route: operation === "asset.bulk" ? "/api/v1/assets/bulk" : "/api/v1/jobs/:job_id",
    path: operation === "asset.bulk" ? "/api/v1/assets/bulk" : `/api/v1/jobs/${params.job_id}`,
    params,
    query: {},
    ...(body === undefined ? {} : { body }),
  });
  const failure = (status: number, body: unknown) => {
    const parsed = ErrorReply.safeParse(body);
    if (!parsed.success) return new ImportFailed(`catalog answered ${status}`);
    const { detail, fields } = parsed.data.error;
    return new ImportFailed([detail ?? parsed.data.error.type, ...(fields ?? []).map((f) => `  ${f.field}: ${f.message}`)].join("\n"));
  };

  // The file goes where the gateway puts uploads, streamed, under the same kind of name.
  const objects = await openUploads(nc);
  const objectName = `org-${cmd.orgId}-${newRequestId()}`;
  await objects.put({ name: objectName }, Readable.toWeb(createReadStream(cmd.file)) as ReadableStream<Uint8Array>);
  const started = await callRpc(nc, rpcSubject("catalog", "asset.bulk"), envelope("asset.bulk", {}, { object: objectName, mode: cmd.mode, on_error: cmd.onError }), {
    timeoutMs: rpcTimeoutMs,
  }).catch(async (err: unknown) => {
    await objects.delete(objectName).catch(() => undefined);
    throw new ImportFailed(`catalog did not take the upload: ${(err as Error).message}`);
  });
  if (started.status !== 202) throw failure(started.status, started.body);
  let job = JobReply.parse(started.body).data;

  const meter = createProgressMeter();
  let last = "";
  const show = (p: ImportProgress) => {
    const text = out.tty ? formatProgressBar(p) : JSON.stringify(p);
    if (text === last) return;
    last = text;
    out.write(out.tty ? `\r\x1b[2K${text}` : `${text}\n`);
  };
  show(meter(job));
  let unanswered = 0;
  while (job.status === "queued" || job.status === "running") {
    await new Promise((r) => setTimeout(r, POLL_MS));
    try {
      const reply = await callRpc(nc, rpcSubject("catalog", "job.get"), envelope("job.get", { job_id: String(job.id) }), { timeoutMs: rpcTimeoutMs });
      if (reply.status !== 200) throw failure(reply.status, reply.body);
      job = JobReply.parse(reply.body).data;
      unanswered = 0;
    } catch (err) {
      if (err instanceof ImportFailed) throw err;
      // Catalog restarting: the job waits for it; give up only after a long silence.
      unanswered += POLL_MS + rpcTimeoutMs;
      if (unanswered > (options.followTimeoutMs ?? 120_000)) throw new ImportFailed(`catalog stopped answering about job ${job.id}: ${(err as Error).message}`);
      continue;
    }
    show(meter(job));
  }
  if (out.tty) out.write("\n");
  return job;
}
