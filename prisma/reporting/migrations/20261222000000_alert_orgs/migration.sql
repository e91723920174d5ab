-- Alert state only for organizations that use alerts. Keeping it for every
-- placed asset of every organization cost about as much per scan batch as the
-- read model itself. An organization starts using alerts when it first sets
-- missing_after_s above 0 or has a live location with is_zone or max_dwell_s;
-- from then on (even if it turns them off again) its state is kept, seeded at
-- that moment from the positions below.

-- When the asset came to its current location (null: placed before this
-- column existed; the seed then takes last_seen_at). Nullable: adding it
-- rewrites nothing.
ALTER TABLE "reporting"."positions" ADD COLUMN "arrived_at" TIMESTAMPTZ(6);

CREATE TABLE "reporting"."alert_orgs" (
    "org_id" INTEGER NOT NULL,
    "since" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "alert_orgs_pkey" PRIMARY KEY ("org_id")
);

INSERT INTO "reporting"."alert_orgs" ("org_id")
SELECT "org_id" FROM "reporting"."org_settings" WHERE "missing_after_s" > 0
UNION
SELECT DISTINCT "org_id" FROM "reporting"."locations"
 WHERE ("is_zone" OR "max_dwell_s" IS NOT NULL) AND "deleted_at" IS NULL;

-- The state of the others would never be read: the seed rebuilds it if they start.
DELETE FROM "reporting"."zone_presence" p WHERE NOT EXISTS (SELECT 1 FROM "reporting"."alert_orgs" o WHERE o."org_id" = p."org_id");
DELETE FROM "reporting"."alert_assets" a WHERE NOT EXISTS (SELECT 1 FROM "reporting"."alert_orgs" o WHERE o."org_id" = a."org_id");
