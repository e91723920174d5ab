-- Tracking: catalog replica, scan idempotency keys, positions, history.

-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "tracking";

-- CreateTable
CREATE TABLE "tracking"."orgs" (
    "id" INTEGER NOT NULL,

    CONSTRAINT "orgs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "tracking"."locations" (
    "org_id" INTEGER NOT NULL,
    "id" INTEGER NOT NULL,
    "external_key" TEXT NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL,

    CONSTRAINT "locations_pkey" PRIMARY KEY ("org_id","id")
);

-- CreateTable
CREATE TABLE "tracking"."assets" (
    "org_id" INTEGER NOT NULL,
    "id" INTEGER NOT NULL,
    "deleted_at" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL,

    CONSTRAINT "assets_pkey" PRIMARY KEY ("org_id","id")
);

-- CreateTable
CREATE TABLE "tracking"."tags" (
    "org_id" INTEGER NOT NULL,
    "id" INTEGER NOT NULL,
    "tag_type" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "owner_type" TEXT NOT NULL,
    "owner_id" INTEGER NOT NULL,
    "is_active" BOOLEAN NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL,

    CONSTRAINT "tags_pkey" PRIMARY KEY ("org_id","id")
);

-- CreateTable
CREATE TABLE "tracking"."stream_offsets" (
    "name" TEXT NOT NULL,
    "stream_seq" BIGINT NOT NULL,

    CONSTRAINT "stream_offsets_pkey" PRIMARY KEY ("name")
);

-- CreateTable
CREATE TABLE "tracking"."scan_keys" (
    "org_id" INTEGER NOT NULL,
    "key" TEXT NOT NULL,

    CONSTRAINT "scan_keys_pkey" PRIMARY KEY ("org_id","key")
);

-- CreateTable
CREATE TABLE "tracking"."positions" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "observed_at" TIMESTAMPTZ(6) NOT NULL,
    "seq" INTEGER NOT NULL,
    "scan_count" INTEGER NOT NULL,
    "prev_location_id" INTEGER,

    CONSTRAINT "positions_pkey" PRIMARY KEY ("org_id","asset_id")
);

-- CreateTable
CREATE TABLE "tracking"."history" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "observed_at" TIMESTAMPTZ(6) NOT NULL,
    "seq" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,

    CONSTRAINT "history_pkey" PRIMARY KEY ("org_id","asset_id","observed_at","seq")
);

-- CreateIndex
CREATE INDEX "locations_org_id_external_key_idx" ON "tracking"."locations"("org_id", "external_key");

-- CreateIndex
CREATE INDEX "tags_org_id_tag_type_value_idx" ON "tracking"."tags"("org_id", "tag_type", "value");
