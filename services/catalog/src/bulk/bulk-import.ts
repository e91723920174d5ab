/**
 * Bulk upload of assets (EXTENSIONS.md section 3), run as a job by the
 * catalog. The gateway streams the upload into the JetStream object store
 * (the stack's uploads bucket, shared uploads.ts) and asks `asset.bulk`; the catalog checks the
 * header, creates the job and answers 202; a worker then runs it:
 *
 *   1. validate: the file is read as a stream, each row checked with the
 *      API's own rules (the POST body schema, keys and tags taken in the
 *      organization or earlier in the file); errors name row and field;
 *   2. write: the rows validation parsed, taken from it chunk by chunk once
 *      decided (the two run side by side, validation ahead: ValidationGate),
 *      in ONE transaction (savepoint per chunk of new rows, per updated row),
 *      which also marks the job written. Under `abort` any failed row rolls it
 *      all back (validation reads on to list the errors); under `skip` the
 *      good rows are written.
 *
 * Nothing is ever half-applied: a crash before the commit leaves nothing,
 * and the job (its lease run out) is taken over and run again from the
 * start. Memory never holds the file: a row's plan is 4 bytes, the keys and
 * tags met so far about 40 bytes a value (SeenValues), and a few chunks of parsed rows.
 */
import { Readable } from "node:stream";
import { parse } from "csv-parse";
import type { ObjectStore } from "@nats-io/obj";
import {
  AssetCreateRequest,
  badRequest,
  sqlExecute,
  sqlQuery,
  ValidationError,
  type FieldError,
  type Logger,
  type Sql,
} from "@whereabouts/shared";
import { z } from "zod";
import { mintExternalKey } from "../db/key-sequence.ts";
import { recordEventBatches, type EventInput, type EventPublisher } from "../events/event-outbox.ts";
import { inTransaction, type CatalogClient } from "../db/catalog-db.ts";
import { insertAssetRecord, newAssetRow, patchAssetRecord } from "../assets/asset-service.ts";
import { assetInsertBatch, insertAssetsWithTags, type AssetInsertBatch } from "../assets/asset-store.ts";
import { attachTags, newTagRow } from "../tags/tag-service.ts";
import { parseObject, type JsonObject } from "../requests/body-parse.ts";
import { checkHeader, rowToBody } from "./csv-columns.ts";
import { SeenValues } from "./seen-values.ts";
import { DEFER_INDEXES_AFTER_ROWS, deferTrigramIndexes, restoreTrigramIndexes } from "./trigram-indexes.ts";
import { claimJob, finishJob, insertJob, JOB_ERRORS_MAX, markJobWritten, reportProgress, requeueJob, succeedJob, touchJob, type JobRow, type RowError } from "./job-store.ts";

const PROGRESS_EVERY = 1000;
/** Rows per lookup (validate) and per set-based insert (write): fewer round trips to a busy database. */
export const BULK_CHUNK_ROWS = 2000;
const CHUNK = BULK_CHUNK_ROWS;

export const BulkStart = z
  .object({
    object: z.string().min(1).max(255),
    mode: z.string().optional(),
    on_error: z.string().optional(),
  })
  .strict();

/** The file's records, as a stream (BOM dropped, RFC 4180 quoting, CRLF or LF). */
async function* records(store: ObjectStore, name: string): AsyncGenerator<string[]> {
  const object = await store.get(name);
  if (!object) throw new Error(`upload ${name} is gone from the object store`);
  const parser = Readable.fromWeb(object.data as never).pipe(parse({ bom: true, relax_column_count: true, skip_empty_lines: false }));
  for await (const record of parser) yield record as string[];
  const err = await object.error;
  if (err) throw err;
}

/**
 * `asset.bulk`: checks the header and the options, creates the job (202).
 * A file without a header row, an unknown column or no `name` column is 400.
 */
export async function startBulkUpload(deps: { db: Sql; store: ObjectStore }, orgId: number, body: unknown): Promise<JobRow> {
  const request = BulkStart.parse(body);
  const fields: FieldError[] = [];
  const mode = request.mode ?? "upsert";
  const onError = request.on_error ?? "abort";
  if (mode !== "upsert" && mode !== "create") fields.push({ field: "mode", code: "invalid_value", message: "mode must be upsert or create", params: { allowed_values: ["upsert", "create"] } } as FieldError);
  if (onError !== "abort" && onError !== "skip") fields.push({ field: "on_error", code: "invalid_value", message: "on_error must be abort or skip", params: { allowed_values: ["abort", "skip"] } } as FieldError);
  let header: string[] | undefined;
  try {
    for await (const record of records(deps.store, request.object)) {
      header = record;
      break;
    }
  } catch (err) {
    if (err instanceof Error && /CSV|Quote|quote|Invalid/.test(err.message)) throw badRequest(`The file is not valid CSV: ${err.message}`);
    throw err;
  }
  if (!header) fields.push({ field: "file", code: "required", message: "the file is empty: a header row is required" });
  else fields.push(...checkHeader(header));
  if (fields.length) {
    await deps.store.delete(request.object).catch(() => undefined);
    throw new ValidationError(fields);
  }
  return insertJob(deps.db, { orgId, mode, onError, objectName: request.object });
}

/**
 * The live assets of `keys` in the organization, by key: one lookup per key
 * through the (org_id, external_key) index. Per key (LATERAL, OFFSET 0), so
 * that no statistics can make it a scan of the organization per chunk.
 */
export async function liveAssetsByKey(db: Sql, orgId: number, keys: string[]): Promise<Map<string, number>> {
  if (!keys.length) return new Map();
  const rows = await sqlQuery<{ id: number; external_key: string }>(
    db,
    `SELECT a.id, a.external_key
       FROM unnest($2::text[]) AS k(external_key)
       JOIN LATERAL (SELECT id, external_key FROM catalog.assets
                      WHERE org_id = $1 AND external_key = k.external_key AND deleted_at IS NULL OFFSET 0) a ON true`,
    [orgId, keys],
  );
  return new Map(rows.map((r) => [r.external_key, r.id]));
}

/**
 * The live tags among `pairs` ("<tag_type>:<value>") in the organization, with
 * their owner, by pair: one lookup per pair through the live unique index
 * (org_id, tag_type, value). Per pair (LATERAL, OFFSET 0): left to the
 * planner, a catalog whose statistics predate a large seed was read whole
 * for every pair (40,000,000 rows compared, 4.9 s, for the first chunk of a
 * bulk job after 20,000 tags were seeded).
 */
export async function takenTags(db: Sql, orgId: number, pairs: string[]): Promise<Map<string, { owner_type: string; owner_key: string | null }>> {
  if (!pairs.length) return new Map();
  const split = pairs.map((pair) => [pair.slice(0, pair.indexOf(":")), pair.slice(pair.indexOf(":") + 1)] as const);
  const rows = await sqlQuery<{ pair: string; owner_type: string; owner_key: string | null }>(
    db,
    `SELECT t.tag_type || ':' || t.value AS pair, t.owner_type, a.external_key AS owner_key
       FROM unnest($2::text[], $3::text[]) AS p(tag_type, value)
       JOIN LATERAL (SELECT tag_type, value, owner_type, owner_id FROM catalog.tags
                      WHERE org_id = $1 AND tag_type = p.tag_type AND value = p.value AND deleted_at IS NULL OFFSET 0) t ON true
       LEFT JOIN LATERAL (SELECT external_key FROM catalog.assets WHERE id = t.owner_id AND t.owner_type = 'asset' OFFSET 0) a ON true`,
    [orgId, split.map((p) => p[0]), split.map((p) => p[1])],
  );
  return new Map(rows.map((r) => [r.pair, r]));
}

interface PlannedRow {
  row: number;
  /** Existing live asset with this key (upsert), or undefined: create. */
  existingId?: number;
}

/**
 * What the write pass does with each row of the file, in 4 bytes a row (a
 * 64 MiB file is about a million rows; a Map of row objects took 70 MB of it).
 */
export class RowPlans {
  private static readonly CREATE = -1;
  private static readonly FAILED = -2;
  private state = new Int32Array(1024);
  /** Rows failed (each counted once, however many of its fields failed). */
  failedCount = 0;
  creates = 0;

  private reach(row: number): void {
    if (row < this.state.length) return;
    let size = this.state.length;
    while (size <= row) size *= 2;
    const grown = new Int32Array(size);
    grown.set(this.state);
    this.state = grown;
  }
  fail(row: number): void {
    this.reach(row);
    if (this.state[row] === RowPlans.FAILED) return;
    if (this.state[row] === RowPlans.CREATE) this.creates--;
    this.state[row] = RowPlans.FAILED;
    this.failedCount++;
  }
  failed(row: number): boolean {
    return row < this.state.length && this.state[row] === RowPlans.FAILED;
  }
  /** The row creates an asset, or updates `existingId` (asset ids are int4); a failed row stays failed. */
  plan(row: number, existingId?: number): void {
    this.reach(row);
    if (this.state[row] === RowPlans.FAILED) return;
    if (existingId === undefined && this.state[row] !== RowPlans.CREATE) this.creates++;
    this.state[row] = existingId ?? RowPlans.CREATE;
  }
  get(row: number): PlannedRow | undefined {
    const value = row < this.state.length ? this.state[row]! : 0;
    if (value === RowPlans.CREATE) return { row };
    return value > 0 ? { row, existingId: value } : undefined;
  }
}

/** Pass 1: every row's problems, and what each good row will do. */
async function validate(db: CatalogClient, store: ObjectStore, job: JobRow, plans: RowPlans, gate: ValidationGate, onProgress: (rows: number) => Promise<void>) {
  // Outside any transaction: its lookups hold no lock past their statement (the trigram
  // indexes' ALTER INDEX would wait for them), and the write reads no snapshot of it.
  // Keys and tags met so far in the file, with the row each first appeared on.
  const seenKeys = new SeenValues();
  const seenTags = new SeenValues();
  const errors: RowError[] = [];
  let header: string[] = [];
  let rowNumber = 0;
  let pending: Array<DecidedRow & { key?: string; tags: string[] }> = [];
  const fail = (row: number, field: string, code: string, message: string) => {
    plans.fail(row);
    if (errors.length < JOB_ERRORS_MAX) errors.push({ row, field, code, message });
  };

  /**
   * A chunk of rows that passed the row rules: keys, then tags, taken earlier
   * in the file (reported on the later row; a row whose key is taken records
   * no tags), then in the organization (per chunk, through the unique indexes).
   */
  async function checkChunk(): Promise<DecidedRow[]> {
    if (!pending.length) return [];
    const chunk = pending;
    const live = pending.filter((p) => {
      if (p.key === undefined) return true;
      const earlier = seenKeys.firstRow(p.key, p.row);
      if (earlier === p.row) return true;
      fail(p.row, "external_key", "conflict", `external_key '${p.key}' is also on row ${earlier}`);
      return false;
    });
    const unique = live.filter((p) => {
      let duplicate = false;
      for (const pair of p.tags) {
        const earlier = seenTags.firstRow(pair, p.row);
        if (earlier !== p.row) {
          fail(p.row, "tags", "conflict", `the tag ${pair} is also on row ${earlier}`);
          duplicate = true;
        }
      }
      return !duplicate;
    });

    const keys = unique.map((p) => p.key).filter((k): k is string => k !== undefined);
    const existing = await liveAssetsByKey(db, job.org_id, keys);
    const taken = await takenTags(db, job.org_id, unique.flatMap((p) => p.tags));
    for (const p of unique) {
      const existingId = p.key === undefined ? undefined : existing.get(p.key);
      if (existingId !== undefined && job.mode === "create") {
        fail(p.row, "external_key", "conflict", `An asset with external_key '${p.key}' already exists`);
        continue;
      }
      for (const pair of p.tags) {
        const owner = taken.get(pair);
        // A tag already on this very asset is no conflict (an unchanged re-import).
        if (owner && !(existingId !== undefined && owner.owner_type === "asset" && owner.owner_key === p.key)) {
          fail(p.row, "tags", "conflict", `The tag ${pair} is already attached in this organization`);
        }
      }
      plans.plan(p.row, existingId);
    }
    pending = [];
    return chunk;
  }

  for await (const record of records(store, job.object_name)) {
    if (rowNumber === 0 && header.length === 0) {
      header = record;
      continue;
    }
    rowNumber++;
    if (record.length === 1 && record[0] === "" && header.length > 1) {
      // A blank line: not a row (it still counts, so later row numbers match the file's data rows).
      fail(rowNumber, "(row)", "invalid_value", "the row is empty");
      continue;
    }
    if (record.length !== header.length) {
      fail(rowNumber, "(row)", "invalid_value", `the row has ${record.length} fields; the header has ${header.length}`);
      continue;
    }
    const { body, errors: textErrors } = rowToBody(header, record);
    for (const e of textErrors) fail(rowNumber, e.field, e.code, e.message);
    if (textErrors.length) continue;
    const parsed = parseObject(AssetCreateRequest, body);
    for (const e of parsed.fields) fail(rowNumber, e.field, e.code, e.message);
    if (parsed.fields.length) continue;
    const request = parsed.data!;
    const key = request.external_key;
    pending.push({ row: rowNumber, raw: body, request, ...(key !== undefined ? { key } : {}), tags: (request.tags ?? []).map((t) => `${t.tag_type}:${t.value}`) });
    if (pending.length >= CHUNK) await gate.advance(rowNumber, await checkChunk());
    if (rowNumber % PROGRESS_EVERY === 0) await onProgress(rowNumber);
    gate.checkStopped();
  }
  await gate.advance(rowNumber, await checkChunk());
  return { rowsTotal: rowNumber, errors };
}

/** The write stopped: validation stops reading. */
class ValidationStopped extends Error {
  override readonly name = "ValidationStopped";
}

/** A row that passed the row rules, as validation parsed it: the write's input (it never reads the file again). */
export interface DecidedRow {
  row: number;
  raw: Record<string, unknown>;
  request: AssetCreateRequest;
}

/** Chunks of decided rows held for the write at most (validation waits beyond): memory holds a few chunks, never the file. */
const DECIDED_CHUNKS_HELD = 2;

/**
 * How far validation has decided the file, and the rows it decided: the
 * write takes them chunk by chunk, in file order, once their plans are final
 * (validation runs ahead: it reads and checks a row in a fraction of the time
 * the database takes to write it). The write once read and parsed the file
 * again itself: a third of the catalog's CPU during a job. The price: under
 * `abort`, a bad row far into the file is found when the write is a few
 * chunks behind it, not half the file behind, so a refused job writes more
 * before it rolls back (nothing of it commits either way).
 */
export class ValidationGate {
  /** Every row up to this one is planned or failed. */
  private through = 0;
  private over = false;
  private error: unknown;
  private stopped = false;
  /** The write takes no more rows (it ended, or gave up). */
  private closed = false;
  private readonly decided: DecidedRow[][] = [];
  /**
   * Whoever waits for the gate to change (validation for room, the write for rows or for a row to be decided):
   * woken on every change, each checks its own condition again.
   */
  private readonly wakers: Array<() => void> = [];

  /**
   * Rows up to `row` are decided; `rows` are those of them that passed the row rules (failed ones stay failed in
   * the plans). Resolves once the write holds few enough chunks, or takes no more.
   */
  async advance(row: number, rows: DecidedRow[] = []): Promise<void> {
    this.through = Math.max(this.through, row);
    if (rows.length && !this.closed) this.decided.push(rows);
    this.wake();
    while (this.decided.length > DECIDED_CHUNKS_HELD && !this.closed) await this.changed();
  }
  /** Validation is over (every row decided, or it failed). */
  get ended(): boolean {
    return this.over;
  }
  /** Every row up to this one is decided (all of the file's once validation is over). */
  get decidedThrough(): number {
    return this.through;
  }
  /** Validation is over: every row is decided, or it failed with `error`. */
  end(error?: unknown): void {
    this.over = true;
    this.error = error;
    this.wake();
  }
  /** Resolves once `row` is decided or validation is over (undefined: already so); rejects if validation failed. */
  reach(row: number): Promise<void> | undefined {
    if (this.error !== undefined) return Promise.reject(this.error);
    const decided = () => row <= this.through || this.over;
    if (decided()) return undefined;
    return (async () => {
      do {
        await this.changed();
        if (this.error !== undefined) throw this.error;
      } while (!decided());
    })();
  }
  /** The next decided rows, in file order; undefined once validation is over and every one was taken. Rejects if validation failed. */
  async take(): Promise<DecidedRow[] | undefined> {
    for (;;) {
      if (this.error !== undefined) throw this.error;
      const rows = this.decided.shift();
      if (rows) {
        this.wake();
        return rows;
      }
      if (this.over) return undefined;
      await this.changed();
    }
  }
  /** The write takes no more rows: validation reads on (to list the errors) holding none. */
  close(): void {
    this.closed = true;
    this.decided.length = 0;
    this.wake();
  }
  /** The write gave up: validation stops at its next row. */
  stop(): void {
    this.stopped = true;
    this.close();
  }
  checkStopped(): void {
    if (this.stopped) throw new ValidationStopped("the write stopped");
  }
  private changed(): Promise<void> {
    return new Promise((resolve) => this.wakers.push(resolve));
  }
  private wake(): void {
    for (const resolve of this.wakers.splice(0)) resolve();
  }
}

/** Under on_error=abort validation failed a row: the write rolls back. */
class RowsFailed extends Error {
  override readonly name = "RowsFailed";
}

/** Test and operations hooks into a running job (composition root only). */
export interface BulkHooks {
  /**
   * After each chunk of rows is written, inside the job's transaction, with the file's row it was written up to
   * and the job's signal (aborted when the service stops: the job then rolls back).
   */
  afterChunk?: (job: JobRow, rowsRead: number, signal: AbortSignal | undefined) => Promise<void>;
}

export interface BulkDeps {
  db: CatalogClient;
  /**
   * The job's transaction runs on a connection of this pool, in pipeline mode
   * (createPool): a chunk's statements go out together while the job reads on.
   */
  writer: CatalogClient;
  events: EventPublisher;
  store: ObjectStore;
  logger: Logger;
  hooks?: BulkHooks;
  /** Aborted when the service stops: the job rolls back and goes back to the queue. */
  signal?: AbortSignal;
}

/** The service is stopping: the job's transaction rolls back and the job is queued again. */
class JobInterrupted extends Error {
  override readonly name = "JobInterrupted";
}

const checkSignal = (signal: AbortSignal | undefined) => {
  if (signal?.aborted) throw new JobInterrupted("the catalog is stopping");
};

/** Events of the job's rows, recorded in the outbox in batches of this many (memory holds one batch). */
const EVENT_BATCH = 2000;

export async function runBulkJob(deps: BulkDeps, job: JobRow): Promise<void> {
  const { db, store, events } = deps;
  const started = performance.now();
  const heartbeat = setInterval(() => void touchJob(db, job.id).catch(() => undefined), 5000);
  /** The trigram indexes' pending list is on for this job (restored once its rows are in, or when it ends). */
  let deferred = false;
  try {
    if (job.written_at) {
      // Taken over after its rows committed: only its events may be left to publish.
      await events.flush();
      await succeedJob(db, job.id);
      await store.delete(job.object_name).catch(() => undefined);
      return;
    }
    // Validation (pass 1) reads the file ahead of the write (pass 2), which follows it row by row
    // through the gate. While validating, rows_done counts rows read; once rows_total is known
    // (the file read through), rows written. Progress goes out one update after another.
    const plans = new RowPlans();
    const gate = new ValidationGate();
    let progress = Promise.resolve();
    let rowsWritten = 0;
    const phaseMs = { validate: 0, write: 0, publish: 0 };
    const validation = (async () => {
      try {
        const checked = await validate(db, store, job, plans, gate, async (rows) => {
          checkSignal(deps.signal);
          progress = progress.then(() => reportProgress(db, job.id, { rowsDone: rows })).catch(() => undefined);
        });
        await progress;
        phaseMs.validate = Math.round(performance.now() - started);
        await reportProgress(db, job.id, { rowsDone: rowsWritten, rowsTotal: checked.rowsTotal });
        gate.end();
        return checked;
      } catch (err) {
        gate.end(err);
        throw err;
      }
    })();
    validation.catch(() => undefined); // awaited below, whichever way the write ends
    const refuse = async () => {
      // Validation reads on alone, holding no rows for the write.
      gate.close();
      const { rowsTotal, errors } = await validation;
      await finishJob(db, job.id, { status: "failed", rowsTotal, rowsDone: rowsTotal, created: 0, updated: 0, unchanged: 0, failedRows: plans.failedCount, errors });
      deps.logger.info({ job_id: job.id, rows: rowsTotal, failed_rows: plans.failedCount }, "bulk upload refused: rows failed under on_error=abort");
      await store.delete(job.object_name).catch(() => undefined);
    };
    // The first chunk decided (or the whole file, if smaller) tells whether the job is large.
    await gate.reach(CHUNK);
    // Refused already: validation reads on (to list the errors), nothing is written.
    if (plans.failedCount && job.on_error === "abort") return await refuse();

    // Pass 2: one transaction; a row that still fails (a concurrent write took its key) rolls back to its savepoint.
    const counts = { created: 0, updated: 0, unchanged: 0 };
    // Where the write's time goes (logged with the job): database statements by kind.
    const writeMs = { assets: 0, outbox: 0 };
    const timed = async <T>(kind: keyof typeof writeMs, work: Promise<T>): Promise<T> => {
      const t = performance.now();
      try {
        return await work;
      } finally {
        writeMs[kind] += performance.now() - t;
      }
    };
    const lateErrors: RowError[] = [];
    if (plans.creates >= DEFER_INDEXES_AFTER_ROWS) deferred = await deferTrigramIndexes(db, deps.logger);
    let rowsTotal = 0;
    const writeStarted = performance.now();
    try {
      await inTransaction(deps.writer, async (tx) => {
        // Events go to the outbox batch by batch (never all in memory), packed into batch messages
        // (CatalogEventBatch); the relay publishes them after commit.
        let batch: EventInput[] = [];
        const emit = async (event: EventInput) => {
          batch.push(event);
          if (batch.length >= EVENT_BATCH) await flushEvents();
        };
        async function flushEvents() {
          const events = batch;
          batch = [];
          if (events.length) await timed("outbox", recordEventBatches(tx, events));
        }
        const rowFailed = (row: number, err: unknown) => {
          const detail = err instanceof Error ? err.message : String(err);
          plans.fail(row);
          lateErrors.push({ row, field: "(row)", code: "conflict", message: detail });
          if (job.on_error === "abort") throw new BulkAborted(row, detail);
        };

        /** One row by itself, under a savepoint: an update (PATCH rules, tags added), or a create the set-based path gave back. */
        async function writeRow(row: number, planned: PlannedRow, raw: Record<string, unknown>, request: AssetCreateRequest) {
          const rowEvents: EventInput[] = [];
          const rowEmit = async (event: EventInput) => void rowEvents.push(event);
          await sqlExecute(tx, "SAVEPOINT bulk_row");
          try {
            if (planned.existingId === undefined) {
              // Minted outside the transaction, as a create does: other creates do not wait for the job.
              const key = request.external_key ?? (await mintExternalKey(db, job.org_id, "asset"));
              await insertAssetRecord(tx, rowEmit, job.org_id, request, key);
              counts.created++;
            } else {
              // The row as a PATCH body: what it sets, by the PATCH rules (unchanged rows stay untouched).
              const { tags: _tags, external_key: _key, ...patch } = raw;
              const result = await patchAssetRecord(tx, rowEmit, job.org_id, planned.existingId, patch as JsonObject);
              // Tags are added, never removed: an asset's other tags stay.
              const have = new Set(result.view.tags.map((t) => `${t.tag_type}:${t.value}`));
              const missing = (request.tags ?? []).filter((t) => !have.has(`${t.tag_type}:${t.value}`));
              if (missing.length) await attachTags(tx, rowEmit, job.org_id, "asset", planned.existingId, missing);
              if (result.changed || missing.length) counts.updated++;
              else counts.unchanged++;
            }
            await sqlExecute(tx, "RELEASE SAVEPOINT bulk_row");
            for (const event of rowEvents) await emit(event);
          } catch (err) {
            await sqlExecute(tx, "ROLLBACK TO SAVEPOINT bulk_row");
            rowFailed(row, err);
          }
        }

        // New assets go in set-based chunks (one statement per chunk for the assets and their tags);
        // a chunk that fails (a concurrent write took a key) is retried row by row.
        type Create = { row: number; planned: PlannedRow; raw: Record<string, unknown>; request: AssetCreateRequest };
        let creates: Create[] = [];
        /** A full chunk's insert, its keys minted (outside the transaction, as a create does) and parameters built. */
        async function prepareCreates(chunk: Create[]): Promise<AssetInsertBatch> {
          const keyOf = async (c: Create) => c.request.external_key ?? (await mintExternalKey(db, job.org_id, "asset"));
          const keys = chunk.every((c) => c.request.external_key !== undefined) ? chunk.map((c) => c.request.external_key!) : await Promise.all(chunk.map(keyOf));
          return assetInsertBatch(
            job.org_id,
            chunk.map(({ request }, i) => ({
              ...newAssetRow(request, keys[i]!),
              tags: (request.tags ?? []).map(newTagRow),
            })),
          );
        }
        async function flushCreates(chunk: Create[], batch: AssetInsertBatch) {
          if (!chunk.length) return;
          // The chunk's statements go out together (the writer pipelines them): awaited one by one,
          // each waited for this process, busy reading the next chunk, and the database idled for
          // a third of the write. A failed insert fails what follows it (the transaction is
          // aborted) until the rollback.
          const queued = <T>(work: Promise<T>) => (work.catch(() => undefined), work);
          const savepoint = queued(sqlExecute(tx, "SAVEPOINT bulk_chunk"));
          // The assets, their tags and their events (recorded by the same statement).
          const inserting = queued(timed("assets", insertAssetsWithTags(tx, batch)));
          const released = queued(sqlExecute(tx, "RELEASE SAVEPOINT bulk_chunk"));
          try {
            await savepoint;
            await inserting;
            await released;
          } catch {
            await sqlExecute(tx, "ROLLBACK TO SAVEPOINT bulk_chunk");
            for (const c of chunk) await writeRow(c.row, c.planned, c.raw, c.request);
            return;
          }
          counts.created += chunk.length;
        }

        const chunkDone = async (rowsWritten: number) => {
          await deps.hooks?.afterChunk?.(job, rowsWritten, deps.signal);
          checkSignal(deps.signal);
        };
        // The database writes one chunk while the next is read and parsed: `writing` chains the
        // transaction's statements in file order, and the reader waits for all but the newest
        // (memory holds two chunks at most).
        let writing: Promise<void> = Promise.resolve();
        const enqueue = (work: () => Promise<void>): Promise<void> => {
          const previous = writing;
          writing = previous.then(work);
          writing.catch(() => undefined); // awaited below: never an unhandled rejection meanwhile
          return previous;
        };
        try {
          // The rows validation decided, chunk by chunk: their plans are final, their parse is validation's.
          let progressAt = PROGRESS_EVERY;
          for (let decided = await gate.take(); decided; decided = await gate.take()) {
            for (const { row, raw, request } of decided) {
              rowsWritten = row - 1;
              if (plans.failedCount && job.on_error === "abort") throw new RowsFailed("validation failed a row");
              const planned = plans.get(row);
              if (!planned) continue;
              if (planned.existingId === undefined) {
                creates.push({ row, planned, raw, request });
                if (creates.length >= CHUNK) {
                  const chunk = creates;
                  creates = [];
                  const batch = await prepareCreates(chunk);
                  await enqueue(async () => {
                    await flushCreates(chunk, batch);
                    await chunkDone(row);
                  });
                }
              } else {
                await enqueue(() => writeRow(row, planned, raw, request));
              }
              if (row >= progressAt) {
                progressAt = row - (row % PROGRESS_EVERY) + PROGRESS_EVERY;
                checkSignal(deps.signal);
                // Rows written count once validation is over (until then rows_done is validation's).
                if (gate.ended) void reportProgress(db, job.id, { rowsDone: row }).catch(() => undefined);
              }
            }
          }
          // Validation is over: every row of the file is decided (a failed one was seen by the check above).
          const rowsRead = gate.decidedThrough;
          const rest = creates;
          const restBatch = await prepareCreates(rest);
          await enqueue(async () => {
            await flushCreates(rest, restBatch);
            await chunkDone(rowsRead);
          });
        } finally {
          // Nothing may still run on the transaction when it commits or rolls back.
          await writing.catch(() => undefined);
        }
        await writing;
        await flushEvents();
        // Validation is over by now (the write took its last rows): its verdict decides.
        const checked = await validation;
        if (plans.failedCount && job.on_error === "abort") throw new RowsFailed("validation failed a row");
        rowsTotal = checked.rowsTotal;
        // The counts commit with the rows: a written job is exactly what was written.
        await markJobWritten(tx, job.id, { rowsTotal, ...counts, failedRows: plans.failedCount, errors: [...checked.errors, ...lateErrors].sort((a, b) => a.row - b.row) });
      });
    } catch (err) {
      // Nothing of the write is left (rolled back). Refused: validation reads on, to list the errors;
      // anything else: validation stops too.
      if (err instanceof RowsFailed) return await refuse();
      gate.stop();
      await validation.catch(() => undefined);
      throw err;
    }
    phaseMs.write = Math.round(performance.now() - writeStarted);
    // The deferred index entries are merged first (before `succeeded`: searches after it are fast again),
    // then the fresh rows analyzed: the planner must know (autovacuum may be off, or slow to notice).
    // One after the other (ALTER INDEX and ANALYZE would wait on each other's locks), beside the
    // publishing (neither needs the other); the job succeeds after both.
    const indexMs = { restore: 0, analyze: 0 };
    const maintaining = (async () => {
      let t = performance.now();
      if (deferred) {
        await restoreTrigramIndexes(db, deps.logger, job.id);
        deferred = false;
      }
      indexMs.restore = Math.round(performance.now() - t);
      t = performance.now();
      if (counts.created + counts.updated >= ANALYZE_AFTER_ROWS) {
        await sqlExecute(db, "ANALYZE catalog.assets, catalog.tags");
        deps.logger.info({ job_id: job.id }, "bulk upload: analyzed catalog.assets and catalog.tags");
      }
      indexMs.analyze = Math.round(performance.now() - t);
    })();
    // Succeeded only once every event is out (and announced): reads after it see the rows everywhere.
    const publishing = performance.now();
    const [published, maintained] = await Promise.allSettled([events.flush(), maintaining]);
    phaseMs.publish = Math.round(performance.now() - publishing);
    for (const outcome of [published, maintained]) if (outcome.status === "rejected") throw outcome.reason;
    await succeedJob(db, job.id);
    deps.logger.info({ job_id: job.id, rows: rowsTotal, ...counts, failed_rows: plans.failedCount, ms: Math.round(performance.now() - started), phase_ms: phaseMs, index_ms: indexMs, write_ms: Object.fromEntries(Object.entries(writeMs).map(([k, v]) => [k, Math.round(v)])) }, "bulk upload done");
  } catch (err) {
    if (err instanceof BulkAborted) {
      await finishJob(db, job.id, {
        status: "failed",
        rowsTotal: job.rows_total ?? 0,
        rowsDone: err.row,
        created: 0,
        updated: 0,
        unchanged: 0,
        failedRows: 1,
        errors: [{ row: err.row, field: "(row)", code: "conflict", message: err.detail }],
      });
      await store.delete(job.object_name).catch(() => undefined);
      return;
    }
    if (err instanceof JobInterrupted) {
      await requeueJob(db, job.id);
      deps.logger.info({ job_id: job.id }, "bulk upload interrupted by shutdown: rolled back and queued again");
      return;
    }
    throw err;
  } finally {
    clearInterval(heartbeat);
    if (deferred) await restoreTrigramIndexes(db, deps.logger, job.id).catch((err: unknown) => deps.logger.warn({ err }, "bulk upload: trigram index restore failed"));
  }
  await store.delete(job.object_name).catch(() => undefined);
}

/** Rows written at or above which the job analyzes the tables it wrote. */
export const ANALYZE_AFTER_ROWS = 1000;

class BulkAborted extends Error {
  constructor(
    readonly row: number,
    readonly detail: string,
  ) {
    super(`row ${row}: ${detail}`);
  }
}

/**
 * Runs jobs one at a time: polls for queued ones (and ones whose worker
 * stopped). Stopping interrupts the running job at its next chunk: it rolls
 * back and is queued again, so a restart (or another replica) runs it at once.
 */
export function startJobWorker(deps: Omit<BulkDeps, "signal"> & { pollMs?: number }) {
  let stopped = false;
  let wake: (() => void) | undefined;
  const stopping = new AbortController();
  const loop = (async () => {
    // A catalog that stopped mid-job may have left the trigram indexes deferred.
    await restoreTrigramIndexes(deps.db, deps.logger).catch((err: unknown) => deps.logger.warn({ err }, "bulk upload: trigram index check failed"));
    while (!stopped) {
      let job: JobRow | undefined;
      try {
        job = await claimJob(deps.db);
        if (job) await runBulkJob({ ...deps, signal: stopping.signal }, job);
      } catch (err) {
        deps.logger.error({ err, job_id: job?.id }, "bulk upload job failed; it will be taken over again");
      }
      if (!job && !stopped) await new Promise<void>((r) => ((wake = r), setTimeout(r, deps.pollMs ?? 1000)));
    }
  })();
  return {
    /** A job was just queued: look now. */
    poke: () => wake?.(),
    async stop() {
      stopped = true;
      stopping.abort();
      wake?.();
      await loop;
    },
  };
}
