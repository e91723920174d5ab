-- Reporting read model: assets (catalog fields + newest position), locations, asset tags.
-- A "report row" is an asset known to catalog and scanned:
--   last_seen_at IS NOT NULL AND external_key IS NOT NULL (the partial indexes' predicate).

-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "reporting";

-- pg_trgm serves the q substring search. Installed in public unless another
-- schema's migration installed it first; the trigram indexes below name the
-- operator class through whichever schema holds it.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

-- CreateTable
CREATE TABLE "reporting"."assets" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "catalog_version" INTEGER NOT NULL DEFAULT 0,
    "external_key" TEXT,
    "name" TEXT,
    "name_lower" TEXT,
    "external_key_lower" TEXT,
    "valid_from" TIMESTAMPTZ(6),
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),
    "location_id" INTEGER,
    "last_seen_at" TIMESTAMPTZ(6),
    "last_seen_seq" BIGINT,

    CONSTRAINT "assets_pkey" PRIMARY KEY ("org_id","asset_id")
);

-- CreateTable
CREATE TABLE "reporting"."locations" (
    "org_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "version" INTEGER NOT NULL,
    "external_key" TEXT NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),

    CONSTRAINT "locations_pkey" PRIMARY KEY ("org_id","location_id")
);

-- CreateTable
CREATE TABLE "reporting"."tags" (
    "org_id" INTEGER NOT NULL,
    "tag_id" INTEGER NOT NULL,
    "version" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "tag_type" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "value_lower" TEXT NOT NULL,
    "is_active" BOOLEAN NOT NULL,
    "valid_from" TIMESTAMPTZ(6) NOT NULL,
    "valid_to" TIMESTAMPTZ(6),
    "deleted_at" TIMESTAMPTZ(6),

    CONSTRAINT "tags_pkey" PRIMARY KEY ("org_id","tag_id")
);

-- CreateTable
CREATE TABLE "reporting"."counts" (
    "org_id" INTEGER NOT NULL,
    "open_live" INTEGER NOT NULL DEFAULT 0,
    "open_all" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "counts_pkey" PRIMARY KEY ("org_id")
);

-- CreateIndex
CREATE INDEX "assets_org_external_key_idx" ON "reporting"."assets"("org_id", "external_key");

-- CreateIndex
CREATE INDEX "assets_org_location_idx" ON "reporting"."assets"("org_id", "location_id", "last_seen_at" DESC, "asset_id" DESC);

-- CreateIndex
CREATE INDEX "locations_org_external_key_idx" ON "reporting"."locations"("org_id", "external_key");

-- CreateIndex
CREATE INDEX "tags_org_asset_idx" ON "reporting"."tags"("org_id", "asset_id");

-- Raw indexes (partial: not expressible in Prisma).
-- The default page: newest scan first, report rows only.
CREATE INDEX "assets_report_idx" ON "reporting"."assets"("org_id", "last_seen_at" DESC, "asset_id" DESC)
    WHERE "last_seen_at" IS NOT NULL AND "external_key" IS NOT NULL;

-- total_count without filters = counts.open_* (report rows without an expiry,
-- kept by the triggers below) minus those not yet valid (valid_from > now(),
-- rare) plus the currently valid rows that have an expiry.
CREATE INDEX "assets_open_from_idx" ON "reporting"."assets"("org_id", "valid_from")
    WHERE "last_seen_at" IS NOT NULL AND "external_key" IS NOT NULL AND "valid_to" IS NULL;
CREATE INDEX "assets_expiring_idx" ON "reporting"."assets"("org_id", "valid_to")
    WHERE "last_seen_at" IS NOT NULL AND "external_key" IS NOT NULL AND "valid_to" IS NOT NULL;

-- counts per organization, maintained per statement from the transition tables.
-- The counts table is the one in the assets table's own schema, so the same
-- function serves the rebuild's tables (schema reporting_build) before the swap.
CREATE FUNCTION "reporting"."assets_counts_sync"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    changed text;
BEGIN
    changed := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT 1 AS sign, * FROM new_rows'
        WHEN 'DELETE' THEN 'SELECT -1 AS sign, * FROM old_rows'
        ELSE 'SELECT 1 AS sign, * FROM new_rows UNION ALL SELECT -1, * FROM old_rows'
    END;
    EXECUTE format(
        'INSERT INTO %I.counts AS c (org_id, open_live, open_all)
         SELECT org_id, sum(sign * (deleted_at IS NULL)::int), sum(sign)
           FROM (%s) r
          WHERE last_seen_at IS NOT NULL AND external_key IS NOT NULL AND valid_to IS NULL
          GROUP BY org_id
         HAVING sum(sign * (deleted_at IS NULL)::int) <> 0 OR sum(sign) <> 0
          ORDER BY org_id
         ON CONFLICT (org_id) DO UPDATE
            SET open_live = c.open_live + EXCLUDED.open_live, open_all = c.open_all + EXCLUDED.open_all',
        TG_TABLE_SCHEMA, changed);
    RETURN NULL;
END
$fn$;

CREATE TRIGGER "assets_counts_insert" AFTER INSERT ON "reporting"."assets"
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_counts_sync"();
CREATE TRIGGER "assets_counts_update" AFTER UPDATE ON "reporting"."assets"
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_counts_sync"();
CREATE TRIGGER "assets_counts_delete" AFTER DELETE ON "reporting"."assets"
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_counts_sync"();

-- Trigram GIN for q (LIKE over the lowercased copies).
DO $$
DECLARE
    trgm text;
BEGIN
    SELECT n.nspname INTO STRICT trgm
      FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_trgm';
    EXECUTE format(
        'CREATE INDEX "assets_search_trgm_idx" ON "reporting"."assets" USING gin ("name_lower" %1$I.gin_trgm_ops, "external_key_lower" %1$I.gin_trgm_ops) WHERE "last_seen_at" IS NOT NULL AND "external_key" IS NOT NULL',
        trgm);
    EXECUTE format(
        'CREATE INDEX "tags_value_trgm_idx" ON "reporting"."tags" USING gin ("value_lower" %1$I.gin_trgm_ops) WHERE "deleted_at" IS NULL AND "is_active"',
        trgm);
END
$$;
