-- Replica of catalog's scan points (EXTENSIONS.md section 5): a scan without
-- a location resolves it through the live, currently effective mapping of its
-- source and antenna, else the source's default (antenna NULL).
CREATE TABLE "tracking"."scan_points" (
    "org_id" INTEGER NOT NULL,
    "id" INTEGER NOT NULL,
    "source" TEXT NOT NULL,
    "antenna" INTEGER,
    "location_id" INTEGER NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL,

    CONSTRAINT "scan_points_pkey" PRIMARY KEY ("org_id", "id")
);

CREATE INDEX "scan_points_org_id_source_antenna_idx" ON "tracking"."scan_points"("org_id", "source", "antenna");
