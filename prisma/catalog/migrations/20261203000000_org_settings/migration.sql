-- Organization settings (EXTENSIONS.md section 5). A missing row means the
-- defaults; `version` orders the settings events for the replicas.
CREATE TABLE "catalog"."org_settings" (
    "org_id" INTEGER NOT NULL,
    "smoothing_window_s" INTEGER NOT NULL DEFAULT 0,
    "zone_min_stay_s" INTEGER NOT NULL DEFAULT 60,
    "missing_after_s" INTEGER NOT NULL DEFAULT 0,
    "history_retention_days" INTEGER,
    "version" INTEGER NOT NULL DEFAULT 1,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "org_settings_pkey" PRIMARY KEY ("org_id")
);
