-- Organization settings tracking acts on (EXTENSIONS.md section 5), from
-- catalog's settings events: smoothing and history retention.
ALTER TABLE "tracking"."orgs"
    ADD COLUMN "smoothing_window_s" INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN "history_retention_days" INTEGER,
    ADD COLUMN "settings_version" INTEGER NOT NULL DEFAULT 0;

-- history_at: when the asset's newest history row was written for (the
-- smoothing window runs from it); history_count: its history rows (the
-- history's total_count), no longer one per scan once smoothing or retention
-- removes some. Until now every scan wrote a row.
ALTER TABLE "tracking"."positions"
    ADD COLUMN "history_at" TIMESTAMPTZ(6),
    ADD COLUMN "history_count" INTEGER NOT NULL DEFAULT 0;
UPDATE "tracking"."positions" SET "history_at" = "observed_at", "history_count" = "scan_count";

-- Per asset, the newest history row retention removed: the oldest kept row's
-- duration_seconds is still measured from it.
CREATE TABLE "tracking"."history_floors" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "observed_key" BIGINT NOT NULL,

    CONSTRAINT "history_floors_pkey" PRIMARY KEY ("org_id", "asset_id")
);
