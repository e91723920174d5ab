-- The q search's trigram indexes without GIN's pending list (see the catalog
-- migration of the same name): every search would otherwise scan the entries
-- inserted since the last VACUUM.
ALTER INDEX "reporting"."assets_search_trgm_idx" SET (fastupdate = off);
ALTER INDEX "reporting"."tags_value_trgm_idx" SET (fastupdate = off);
SELECT gin_clean_pending_list(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'reporting' AND c.relname LIKE '%\_trgm\_idx';
