/** Jobs (catalog.jobs): created by an upload, claimed by one worker at a time, read by GET /api/v1/jobs/<id>. */
import { sqlQuery, sqlQueryOne, toWireTimestampOrNull, type Sql } from "@whereabouts/shared";

export const JOB_KIND_ASSETS_BULK = "assets.bulk";
/** A running job whose heartbeat is older than this is taken over by another worker. */
export const JOB_LEASE_MS = 30_000;
export const JOB_ERRORS_MAX = 1000;

export interface RowError {
  row: number;
  field: string;
  code: string;
  message: string;
}

export interface JobRow {
  id: number;
  org_id: number;
  kind: string;
  status: "queued" | "running" | "succeeded" | "failed";
  mode: "upsert" | "create";
  on_error: "abort" | "skip";
  object_name: string;
  rows_total: number | null;
  rows_done: number;
  created: number;
  updated: number;
  unchanged: number;
  failed_rows: number;
  errors: RowError[];
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  /** The rows are committed and the counts final; the job's events are being published. */
  written_at: Date | null;
}

/** The job as GET /api/v1/jobs/<id> shows it. */
export const jobView = (job: JobRow) => ({
  id: job.id,
  kind: job.kind,
  status: job.status,
  rows_total: job.rows_total,
  rows_done: job.rows_done,
  created: job.created,
  updated: job.updated,
  unchanged: job.unchanged,
  failed_rows: job.failed_rows,
  errors: job.errors,
  created_at: toWireTimestampOrNull(job.created_at)!,
  started_at: toWireTimestampOrNull(job.started_at),
  finished_at: toWireTimestampOrNull(job.finished_at),
});

export const insertJob = (db: Sql, job: { orgId: number; mode: string; onError: string; objectName: string }) =>
  sqlQueryOne<JobRow>(
    db,
    `INSERT INTO catalog.jobs (org_id, kind, mode, on_error, object_name) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
    [job.orgId, JOB_KIND_ASSETS_BULK, job.mode, job.onError, job.objectName],
  ).then((row) => row!);

export const findJob = (db: Sql, orgId: number, id: number) =>
  sqlQueryOne<JobRow>(db, `SELECT * FROM catalog.jobs WHERE org_id = $1 AND id = $2`, [orgId, id]);

/**
 * The next job to run: queued, or running under a worker that stopped (its
 * lease ran out); claimed for this worker. A job not yet written starts over
 * (nothing of it was committed); a written one keeps its counts.
 */
export const claimJob = (db: Sql) =>
  sqlQueryOne<JobRow>(
    db,
    `UPDATE catalog.jobs SET status = 'running', started_at = COALESCE(started_at, now()), heartbeat_at = now(),
            rows_done = CASE WHEN written_at IS NULL THEN 0 ELSE rows_done END,
            created = CASE WHEN written_at IS NULL THEN 0 ELSE created END,
            updated = CASE WHEN written_at IS NULL THEN 0 ELSE updated END,
            unchanged = CASE WHEN written_at IS NULL THEN 0 ELSE unchanged END,
            failed_rows = CASE WHEN written_at IS NULL THEN 0 ELSE failed_rows END,
            errors = CASE WHEN written_at IS NULL THEN '[]' ELSE errors END
      WHERE id = (SELECT id FROM catalog.jobs
                   WHERE status = 'queued' OR (status = 'running' AND heartbeat_at < now() - make_interval(secs => $1::int / 1000.0))
                   ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
      RETURNING *`,
    [JOB_LEASE_MS],
  );

export async function reportProgress(db: Sql, id: number, progress: { rowsTotal?: number | null; rowsDone: number }): Promise<void> {
  await sqlQuery(db, `UPDATE catalog.jobs SET rows_done = $2, rows_total = COALESCE($3, rows_total), heartbeat_at = now() WHERE id = $1`, [
    id,
    progress.rowsDone,
    progress.rowsTotal ?? null,
  ]);
}

/** The worker is alive (its lease renewed). */
export async function touchJob(db: Sql, id: number): Promise<void> {
  await sqlQuery(db, `UPDATE catalog.jobs SET heartbeat_at = now() WHERE id = $1 AND status = 'running'`, [id]);
}

/** A job this worker stops before its rows committed goes back to the queue, for the next worker at once. */
export async function requeueJob(db: Sql, id: number): Promise<void> {
  await sqlQuery(db, `UPDATE catalog.jobs SET status = 'queued', heartbeat_at = NULL WHERE id = $1 AND status = 'running'`, [id]);
}

/** The job's rows committed (inside their transaction): final counts, still `running` while its events go out. */
export async function markJobWritten(
  tx: Sql,
  id: number,
  outcome: { rowsTotal: number; created: number; updated: number; unchanged: number; failedRows: number; errors: RowError[] },
): Promise<void> {
  await sqlQuery(
    tx,
    `UPDATE catalog.jobs SET rows_total = $2, rows_done = $2, created = $3, updated = $4, unchanged = $5,
            failed_rows = $6, errors = $7::jsonb, written_at = now(), heartbeat_at = now()
      WHERE id = $1`,
    [id, outcome.rowsTotal, outcome.created, outcome.updated, outcome.unchanged, outcome.failedRows, JSON.stringify(outcome.errors.slice(0, JOB_ERRORS_MAX))],
  );
}

/** Every event of a written job is published: it has succeeded. */
export async function succeedJob(db: Sql, id: number): Promise<void> {
  await sqlQuery(db, `UPDATE catalog.jobs SET status = 'succeeded', finished_at = now(), heartbeat_at = now() WHERE id = $1 AND written_at IS NOT NULL`, [id]);
}

export async function finishJob(
  db: Sql,
  id: number,
  outcome: { status: "succeeded" | "failed"; rowsTotal: number; rowsDone: number; created: number; updated: number; unchanged: number; failedRows: number; errors: RowError[] },
): Promise<void> {
  await sqlQuery(
    db,
    `UPDATE catalog.jobs SET status = $2, rows_total = $3, rows_done = $4, created = $5, updated = $6, unchanged = $7,
            failed_rows = $8, errors = $9::jsonb, finished_at = now(), heartbeat_at = now()
      WHERE id = $1`,
    [id, outcome.status, outcome.rowsTotal, outcome.rowsDone, outcome.created, outcome.updated, outcome.unchanged, outcome.failedRows, JSON.stringify(outcome.errors.slice(0, JOB_ERRORS_MAX))],
  );
}
