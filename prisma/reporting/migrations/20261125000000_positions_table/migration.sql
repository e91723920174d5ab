-- Positions move out of the assets row into their own narrow table.
--
-- Every scan batch advances last_seen_at of the assets it saw. On the assets
-- row that column is indexed (the report's sort indexes), so each of those
-- updates was a non-HOT update: a new entry in every index of the row,
-- including the trigram GIN over name and external_key (a few dozen entries
-- per row). Measured on 20,000 assets: 2,300 position updates took 265-480 ms
-- on the wide row, 42-50 ms on this table. The assets row now changes only
-- with catalog events, and once when an asset is first scanned (`scanned`).

CREATE TABLE "reporting"."positions" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "last_seen_at" TIMESTAMPTZ(6) NOT NULL,
    "last_seen_seq" BIGINT NOT NULL,

    CONSTRAINT "positions_pkey" PRIMARY KEY ("org_id","asset_id")
);

INSERT INTO "reporting"."positions" ("org_id", "asset_id", "location_id", "last_seen_at", "last_seen_seq")
SELECT "org_id", "asset_id", "location_id", "last_seen_at", COALESCE("last_seen_seq", 0)
  FROM "reporting"."assets"
 WHERE "last_seen_at" IS NOT NULL AND "location_id" IS NOT NULL;

-- The default page (newest scan first) and the location filter walk these in order.
CREATE INDEX "positions_report_idx" ON "reporting"."positions"("org_id", "last_seen_at" DESC, "asset_id" DESC);
CREATE INDEX "positions_location_idx" ON "reporting"."positions"("org_id", "location_id", "last_seen_at" DESC, "asset_id" DESC);

-- A report row is now: scanned AND external_key IS NOT NULL.
ALTER TABLE "reporting"."assets" ADD COLUMN "scanned" BOOLEAN NOT NULL DEFAULT false;

DROP INDEX "reporting"."assets_org_location_idx";
DROP INDEX "reporting"."assets_report_idx";
DROP INDEX "reporting"."assets_open_from_idx";
DROP INDEX "reporting"."assets_expiring_idx";
DROP INDEX "reporting"."assets_search_trgm_idx";

-- The counts follow the new predicate (the set of report rows is the same).
CREATE OR REPLACE FUNCTION "reporting"."assets_counts_sync"() RETURNS trigger LANGUAGE plpgsql AS $fn$
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
          WHERE scanned AND external_key IS NOT NULL AND valid_to IS NULL
          GROUP BY org_id
         HAVING sum(sign * (deleted_at IS NULL)::int) <> 0 OR sum(sign) <> 0
          ORDER BY org_id
         ON CONFLICT (org_id) DO UPDATE
            SET open_live = c.open_live + EXCLUDED.open_live, open_all = c.open_all + EXCLUDED.open_all',
        TG_TABLE_SCHEMA, changed);
    RETURN NULL;
END
$fn$;

-- Setting the flag would count every scanned row a second time (its old
-- version has scanned = false): the counts already hold these rows, so the
-- flag is set with the triggers off.
ALTER TABLE "reporting"."assets" DISABLE TRIGGER USER;
UPDATE "reporting"."assets" SET "scanned" = true WHERE "last_seen_at" IS NOT NULL;
ALTER TABLE "reporting"."assets" ENABLE TRIGGER USER;

ALTER TABLE "reporting"."assets" DROP COLUMN "location_id", DROP COLUMN "last_seen_at", DROP COLUMN "last_seen_seq";

CREATE INDEX "assets_open_from_idx" ON "reporting"."assets"("org_id", "valid_from")
    WHERE "scanned" AND "external_key" IS NOT NULL AND "valid_to" IS NULL;
CREATE INDEX "assets_expiring_idx" ON "reporting"."assets"("org_id", "valid_to")
    WHERE "scanned" AND "external_key" IS NOT NULL AND "valid_to" IS NOT NULL;

DO $$
DECLARE
    trgm text;
BEGIN
    SELECT n.nspname INTO STRICT trgm
      FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_trgm';
    EXECUTE format(
        'CREATE INDEX "assets_search_trgm_idx" ON "reporting"."assets" USING gin ("name_lower" %1$I.gin_trgm_ops, "external_key_lower" %1$I.gin_trgm_ops) WITH (fastupdate = off) WHERE "scanned" AND "external_key" IS NOT NULL',
        trgm);
END
$$;
