-- Background jobs of an organization (EXTENSIONS.md section 3): bulk asset
-- uploads. The uploaded file waits in the JetStream object store under
-- `object_name` until the job has finished with it.
CREATE TABLE "catalog"."jobs" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "kind" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "mode" TEXT NOT NULL,
    "on_error" TEXT NOT NULL,
    "object_name" TEXT NOT NULL,
    "rows_total" INTEGER,
    "rows_done" INTEGER NOT NULL DEFAULT 0,
    "created" INTEGER NOT NULL DEFAULT 0,
    "updated" INTEGER NOT NULL DEFAULT 0,
    "unchanged" INTEGER NOT NULL DEFAULT 0,
    "failed_rows" INTEGER NOT NULL DEFAULT 0,
    "errors" JSONB NOT NULL DEFAULT '[]',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),
    -- A running job's worker touches this; a job whose worker stopped touching it is taken over.
    "heartbeat_at" TIMESTAMPTZ(3),

    CONSTRAINT "jobs_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "jobs_status" CHECK ("status" IN ('queued', 'running', 'succeeded', 'failed'))
);
-- Unfinished jobs, for the worker after a restart.
CREATE INDEX "jobs_unfinished_idx" ON "catalog"."jobs" ("id") WHERE "status" IN ('queued', 'running');
