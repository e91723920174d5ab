-- Events for partners (EXTENSIONS.md section 4): the feed, derived from the
-- CATALOG and TRACKING streams in the projection's own transaction, and the
-- webhooks that push it. Not part of the read model's rebuild: the rebuild
-- swaps only the tables it builds (READ_MODEL_TABLES).

-- One row per partner event; `seq` orders the feed and is its cursor.
CREATE TABLE "reporting"."partner_events" (
    "seq" BIGSERIAL NOT NULL,
    "id" TEXT NOT NULL,
    "org_id" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    -- As the source event wrote it (rendered as is); `occurred` for time windows.
    "occurred_at" TEXT NOT NULL,
    "occurred" TIMESTAMPTZ(6) NOT NULL,
    "recorded_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    -- Deliveries of one key go out in order: `asset:<id>` or `location:<id>`.
    "ordering_key" TEXT NOT NULL,
    -- The stream event it came from: a redelivered batch adds nothing.
    "source_id" TEXT NOT NULL,
    -- json, not jsonb: the record keeps the key order the API shows.
    "data" JSON NOT NULL,

    CONSTRAINT "partner_events_pkey" PRIMARY KEY ("seq")
);
CREATE UNIQUE INDEX "partner_events_org_source_key" ON "reporting"."partner_events" ("org_id", "source_id");
CREATE INDEX "partner_events_org_seq_idx" ON "reporting"."partner_events" ("org_id", "seq");
CREATE INDEX "partner_events_org_occurred_idx" ON "reporting"."partner_events" ("org_id", "occurred");
CREATE INDEX "partner_events_recorded_idx" ON "reporting"."partner_events" ("recorded_at");

-- How far retention has removed each organization's events: a cursor before it is 410.
CREATE TABLE "reporting"."partner_event_purges" (
    "org_id" INTEGER NOT NULL,
    "purged_through" BIGINT NOT NULL,

    CONSTRAINT "partner_event_purges_pkey" PRIMARY KEY ("org_id")
);

CREATE TABLE "reporting"."webhooks" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "url" TEXT NOT NULL,
    "types" TEXT[] NOT NULL,
    "description" TEXT,
    "secret" TEXT NOT NULL,
    -- After a rotation the old secret signs too, until `previous_secret_until`.
    "previous_secret" TEXT,
    "previous_secret_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhooks_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "webhooks_org_idx" ON "reporting"."webhooks" ("org_id", "id");

-- One row per (webhook, event) to deliver; its attempts are logged in webhook_attempts.
CREATE TABLE "reporting"."webhook_deliveries" (
    "id" BIGSERIAL NOT NULL,
    "webhook_id" INTEGER NOT NULL,
    "org_id" INTEGER NOT NULL,
    "event_seq" BIGINT NOT NULL,
    "ordering_key" TEXT NOT NULL,
    -- Made by POST .../replay (the event may have been delivered before).
    "replay" BOOLEAN NOT NULL DEFAULT false,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    -- A replica sending it holds it until then; past it (the replica died) another takes it.
    "lease_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "webhook_deliveries_state" CHECK ("state" IN ('pending', 'delivered', 'failed'))
) WITH (fillfactor = 70); -- room on the page: taking a lease is a HOT update
-- Each event once per webhook (replays aside).
CREATE UNIQUE INDEX "webhook_deliveries_once_key" ON "reporting"."webhook_deliveries" ("webhook_id", "event_seq") WHERE NOT "replay";
-- Due work, and the head of each ordering key (per-asset order).
CREATE INDEX "webhook_deliveries_due_idx" ON "reporting"."webhook_deliveries" ("next_attempt_at", "id") WHERE "state" = 'pending';
CREATE INDEX "webhook_deliveries_chain_idx" ON "reporting"."webhook_deliveries" ("webhook_id", "ordering_key", "event_seq", "id") WHERE "state" = 'pending';

CREATE TABLE "reporting"."webhook_attempts" (
    "id" BIGSERIAL NOT NULL,
    "delivery_id" BIGINT NOT NULL,
    "webhook_id" INTEGER NOT NULL,
    "org_id" INTEGER NOT NULL,
    "event_id" TEXT NOT NULL,
    "event_type" TEXT NOT NULL,
    "attempt" INTEGER NOT NULL,
    "status_code" INTEGER,
    "duration_ms" INTEGER,
    "error" TEXT,
    "state" TEXT NOT NULL,
    "next_attempt_at" TIMESTAMPTZ(3),
    "attempted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "webhook_attempts_webhook_idx" ON "reporting"."webhook_attempts" ("webhook_id", "id");
