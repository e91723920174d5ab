-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "catalog";

-- pg_trgm backs the q substring search (GIN trigram indexes). It lives in
-- public so every schema can share it; the opclass is resolved through it.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
SELECT set_config(
  'search_path',
  '"catalog", ' || (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'),
  true
);

-- CreateTable
CREATE TABLE "catalog"."assets" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "external_key" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "is_active" BOOLEAN NOT NULL DEFAULT true,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "location_id" INTEGER,
    "location_observed_at" TIMESTAMPTZ(6),
    "location_seq" BIGINT,
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "assets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "catalog"."locations" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "external_key" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "is_active" BOOLEAN NOT NULL DEFAULT true,
    "parent_id" INTEGER,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "locations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "catalog"."tags" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "owner_type" TEXT NOT NULL,
    "owner_id" INTEGER NOT NULL,
    "tag_type" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "is_active" BOOLEAN NOT NULL DEFAULT true,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "tags_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "catalog"."key_sequences" (
    "org_id" INTEGER NOT NULL,
    "entity" TEXT NOT NULL,
    "last_value" INTEGER NOT NULL,

    CONSTRAINT "key_sequences_pkey" PRIMARY KEY ("org_id","entity")
);

-- CreateTable
CREATE TABLE "catalog"."outbox_events" (
    "id" BIGSERIAL NOT NULL,
    "event_id" TEXT NOT NULL,
    "org_id" INTEGER NOT NULL,
    "subject" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),

    CONSTRAINT "outbox_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "assets_org_id_external_key_id_idx" ON "catalog"."assets"("org_id", "external_key", "id");

-- CreateIndex
CREATE INDEX "assets_org_id_name_id_idx" ON "catalog"."assets"("org_id", "name", "id");

-- CreateIndex
CREATE INDEX "assets_org_id_created_at_id_idx" ON "catalog"."assets"("org_id", "created_at", "id");

-- CreateIndex
CREATE INDEX "assets_org_id_updated_at_id_idx" ON "catalog"."assets"("org_id", "updated_at", "id");

-- CreateIndex
CREATE INDEX "assets_org_id_location_id_idx" ON "catalog"."assets"("org_id", "location_id");

-- CreateIndex
CREATE INDEX "locations_org_id_external_key_id_idx" ON "catalog"."locations"("org_id", "external_key", "id");

-- CreateIndex
CREATE INDEX "locations_org_id_name_id_idx" ON "catalog"."locations"("org_id", "name", "id");

-- CreateIndex
CREATE INDEX "locations_org_id_created_at_id_idx" ON "catalog"."locations"("org_id", "created_at", "id");

-- CreateIndex
CREATE INDEX "locations_org_id_parent_id_name_id_idx" ON "catalog"."locations"("org_id", "parent_id", "name", "id");

-- CreateIndex
CREATE INDEX "tags_org_id_owner_type_owner_id_idx" ON "catalog"."tags"("org_id", "owner_type", "owner_id");

-- CreateIndex
CREATE UNIQUE INDEX "outbox_events_event_id_key" ON "catalog"."outbox_events"("event_id");

-- AddForeignKey
ALTER TABLE "catalog"."locations" ADD CONSTRAINT "locations_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "catalog"."locations"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Raw indexes (declared as `// raw index:` comments in schema.prisma).

-- Live-row uniqueness: a soft-deleted row's key is reusable at once.
CREATE UNIQUE INDEX "assets_org_id_external_key_live_key" ON "catalog"."assets"("org_id", "external_key") WHERE "deleted_at" IS NULL;
CREATE UNIQUE INDEX "locations_org_id_external_key_live_key" ON "catalog"."locations"("org_id", "external_key") WHERE "deleted_at" IS NULL;
CREATE UNIQUE INDEX "tags_org_id_tag_type_value_live_key" ON "catalog"."tags"("org_id", "tag_type", "value") WHERE "deleted_at" IS NULL;

-- q: case-insensitive substring search (ILIKE) through trigram indexes.
CREATE INDEX "assets_name_trgm_idx" ON "catalog"."assets" USING gin ("name" gin_trgm_ops);
CREATE INDEX "assets_external_key_trgm_idx" ON "catalog"."assets" USING gin ("external_key" gin_trgm_ops);
CREATE INDEX "assets_description_trgm_idx" ON "catalog"."assets" USING gin ("description" gin_trgm_ops);
CREATE INDEX "locations_name_trgm_idx" ON "catalog"."locations" USING gin ("name" gin_trgm_ops);
CREATE INDEX "locations_external_key_trgm_idx" ON "catalog"."locations" USING gin ("external_key" gin_trgm_ops);
CREATE INDEX "locations_description_trgm_idx" ON "catalog"."locations" USING gin ("description" gin_trgm_ops);
CREATE INDEX "tags_value_trgm_idx" ON "catalog"."tags" USING gin ("value" gin_trgm_ops);

-- The outbox relay's queue.
CREATE INDEX "outbox_events_unpublished_idx" ON "catalog"."outbox_events"("id") WHERE "published_at" IS NULL;
