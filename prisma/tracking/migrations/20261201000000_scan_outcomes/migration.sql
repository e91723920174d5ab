-- What became of each handheld submission (EXTENSIONS.md section 2: GET
-- /handheld/api/scans/<event_id>): processed, with the assets recorded and the
-- tags that did not resolve, or dead-lettered with the reason. Written only
-- for scans on `scans.<org_id>.handheld-<user_id>`, so fixed readers' ingest
-- pays nothing for it.
CREATE TABLE "tracking"."scan_outcomes" (
    "org_id" INTEGER NOT NULL,
    "event_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "location_id" INTEGER,
    "asset_ids" INTEGER[] NOT NULL DEFAULT '{}',
    "unresolved_tags" JSONB NOT NULL DEFAULT '[]',
    "reason" TEXT,
    "recorded_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "scan_outcomes_pkey" PRIMARY KEY ("org_id", "event_id"),
    CONSTRAINT "scan_outcomes_status" CHECK ("status" IN ('processed', 'dead_lettered'))
);
