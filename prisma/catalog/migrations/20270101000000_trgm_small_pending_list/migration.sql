-- The q search's trigram indexes with a small pending list (reporting's
-- have one too, 20261228000000). Without one (20261123000000) every insert
-- and every change of a searched column updates the index entry by entry:
-- creating an asset with one tag wrote about 116 WAL records (36 kB), nearly
-- all of them trigram entries of the name, external key, description and tag
-- value. A pending list defers those entries and merges them in sorted runs.
-- At 64 kB (the least Postgres allows) the insert that fills it merges it, so
-- a search scans at most a few pages per index, vacuum or not: an asset with
-- a tag inserted at 1,590-1,707 instead of 1,096-1,218 a second (pgbench, 4
-- clients), a 4-column search 0.03-0.13 ms slower (256 kB: inserts 1,838-2,148
-- a second, searches up to 0.5 ms slower). A large bulk job raises the limit
-- for its duration (services/catalog/src/bulk/trigram-indexes.ts).
ALTER INDEX "catalog"."assets_name_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."assets_external_key_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."assets_description_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."locations_name_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."locations_external_key_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."locations_description_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
ALTER INDEX "catalog"."tags_value_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 64);
