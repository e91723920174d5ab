-- Scan points (EXTENSIONS.md section 5): a reader's source and optional
-- antenna mapped to a location. antenna NULL is the source's default mapping.
CREATE TABLE "catalog"."scan_points" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "source" TEXT NOT NULL,
    "antenna" INTEGER,
    "location_id" INTEGER NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "scan_points_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "scan_points_location_id_fkey" FOREIGN KEY ("location_id") REFERENCES "catalog"."locations"("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- One live mapping per (source, antenna) in an organization; NULL (the
-- source's default) is one value of its own, hence the COALESCE.
CREATE UNIQUE INDEX "scan_points_org_id_source_antenna_live_key" ON "catalog"."scan_points"("org_id", "source", COALESCE("antenna", -1))
    WHERE "deleted_at" IS NULL;
-- The list's default order and its location filter.
CREATE INDEX "scan_points_org_id_source_antenna_id_idx" ON "catalog"."scan_points"("org_id", "source", "antenna", "id");
CREATE INDEX "scan_points_org_id_location_id_idx" ON "catalog"."scan_points"("org_id", "location_id");
