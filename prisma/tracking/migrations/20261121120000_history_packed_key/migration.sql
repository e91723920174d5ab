-- History: observed_at and the tie-breaking sequence packed into one bigint
-- key, observed_key = (microseconds since the Unix epoch) * 16 + tie, where
-- tie (0..15) orders scans of one asset at the same microsecond by ingestion.
-- The primary key (org_id, asset_id, observed_key) is 16 bytes of data: an
-- index tuple of 24 bytes instead of 32, small enough for PostgreSQL's
-- "split after new item" page split, which keeps per-asset appends from
-- leaving leaf pages half empty. Rows keep their order and microseconds.

-- CreateTable
CREATE TABLE "tracking"."history_packed" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "observed_key" BIGINT NOT NULL,
    "location_id" INTEGER NOT NULL,

    CONSTRAINT "history_packed_pkey" PRIMARY KEY ("org_id","asset_id","observed_key")
);

INSERT INTO "tracking"."history_packed" ("org_id", "asset_id", "observed_key", "location_id")
SELECT "org_id", "asset_id",
       (extract(epoch FROM "observed_at") * 1000000)::bigint * 16
         + (row_number() OVER (PARTITION BY "org_id", "asset_id", "observed_at" ORDER BY "seq") - 1),
       "location_id"
  FROM "tracking"."history";

-- DropTable
DROP TABLE "tracking"."history";

ALTER TABLE "tracking"."history_packed" RENAME TO "history";
ALTER TABLE "tracking"."history" RENAME CONSTRAINT "history_packed_pkey" TO "history_pkey";
