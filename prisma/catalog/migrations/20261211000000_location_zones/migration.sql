-- Zones and dwell limits on locations (EXTENSIONS.md section 5): optional
-- fields, additive within v1. A zone counts its subtree as inside; max_dwell_s
-- (seconds, null: no limit) bounds how long an asset stays at the location.
ALTER TABLE "catalog"."locations"
    ADD COLUMN "is_zone" BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN "max_dwell_s" INTEGER;
