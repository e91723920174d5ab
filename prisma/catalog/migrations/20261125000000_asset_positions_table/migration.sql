-- Asset positions move out of the assets row into their own narrow table.
--
-- A move changed assets.location_id, which is indexed, so every move was a
-- non-HOT update: a new entry in each of the row's ten indexes, three of them
-- trigram GINs (dozens of entries each). At full churn that cost catalog more
-- than tracking spent on the scans themselves. A move now rewrites one narrow
-- row with two indexes; the assets row changes only with master data.

CREATE TABLE "catalog"."asset_positions" (
    "asset_id" INTEGER NOT NULL,
    "org_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "observed_at" TIMESTAMPTZ(6) NOT NULL,
    "seq" BIGINT NOT NULL,

    CONSTRAINT "asset_positions_pkey" PRIMARY KEY ("asset_id"),
    CONSTRAINT "asset_positions_asset_id_fkey" FOREIGN KEY ("asset_id") REFERENCES "catalog"."assets"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

INSERT INTO "catalog"."asset_positions" ("asset_id", "org_id", "location_id", "observed_at", "seq")
SELECT "id", "org_id", "location_id", COALESCE("location_observed_at", "updated_at"), COALESCE("location_seq", 0)
  FROM "catalog"."assets"
 WHERE "location_id" IS NOT NULL;

-- The location filter of the asset list and the "assets placed here" check of a location delete.
CREATE INDEX "asset_positions_org_id_location_id_asset_id_idx" ON "catalog"."asset_positions"("org_id", "location_id", "asset_id");

DROP INDEX "catalog"."assets_org_id_location_id_idx";
ALTER TABLE "catalog"."assets" DROP COLUMN "location_id", DROP COLUMN "location_observed_at", DROP COLUMN "location_seq";
