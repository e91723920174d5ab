-- Zones and alerts (EXTENSIONS.md section 5), computed by reporting from the
-- streams it already consumes. The location columns are part of the read model
-- (the rebuild fills them); the alert state is not: like the partner events it
-- lives outside READ_MODEL_TABLES and survives a rebuild and a restart.

-- The tree and the alert fields of each location, as catalog's events carry them.
ALTER TABLE "reporting"."locations"
    ADD COLUMN "parent_id" INTEGER,
    ADD COLUMN "is_zone" BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN "max_dwell_s" INTEGER;

-- Catalog's organization settings that alerts need (no row: the defaults).
CREATE TABLE "reporting"."org_settings" (
    "org_id" INTEGER NOT NULL,
    "version" INTEGER NOT NULL,
    "zone_min_stay_s" INTEGER NOT NULL,
    "missing_after_s" INTEGER NOT NULL,

    CONSTRAINT "org_settings_pkey" PRIMARY KEY ("org_id")
);

-- One row per placed asset: where it is since when, when it was last seen,
-- and when its dwell and missing alerts fall due (null: none pending).
CREATE TABLE "reporting"."alert_assets" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "arrived_at" TIMESTAMPTZ(6) NOT NULL,
    "last_seen_at" TIMESTAMPTZ(6) NOT NULL,
    "last_seen_seq" BIGINT NOT NULL,
    "dwell_due_at" TIMESTAMPTZ(6),
    "dwell_fired" BOOLEAN NOT NULL DEFAULT false,
    "missing_due_at" TIMESTAMPTZ(6),
    "missing_fired" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "alert_assets_pkey" PRIMARY KEY ("org_id","asset_id")
);
-- Due work only: the poller reads the head of these, never the whole table.
CREATE INDEX "alert_assets_dwell_due_idx" ON "reporting"."alert_assets" ("dwell_due_at") WHERE "dwell_due_at" IS NOT NULL;
CREATE INDEX "alert_assets_missing_due_idx" ON "reporting"."alert_assets" ("missing_due_at") WHERE "missing_due_at" IS NOT NULL;
-- A location's max_dwell_s changed: its assets' due times.
CREATE INDEX "alert_assets_location_idx" ON "reporting"."alert_assets" ("org_id", "location_id", "asset_id");

-- An asset's standing with a zone: inside as last announced, and a crossing
-- not yet confirmed (crossed_at, due at crossed_at + zone_min_stay_s). A row
-- exists only while the asset is inside or a crossing is pending.
CREATE TABLE "reporting"."zone_presence" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "zone_id" INTEGER NOT NULL,
    "inside" BOOLEAN NOT NULL,
    "crossed_at" TIMESTAMPTZ(6),
    "due_at" TIMESTAMPTZ(6),

    CONSTRAINT "zone_presence_pkey" PRIMARY KEY ("org_id","asset_id","zone_id")
);
CREATE INDEX "zone_presence_due_idx" ON "reporting"."zone_presence" ("due_at") WHERE "due_at" IS NOT NULL;
