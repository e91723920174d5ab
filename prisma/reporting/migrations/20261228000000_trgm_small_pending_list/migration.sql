-- The q search's trigram indexes with a small pending list. Without one
-- (migration 20261123000000) every insert updates the index entry by entry:
-- an asset's first scan (it becomes a report row, entering the partial
-- index) cost 88 us of its 134 us in reporting, a tag's insert 6x the row's
-- own cost. A pending list defers those entries and merges them in bulk
-- (measured on 6,000 first scans: 900 ms -> 405 ms), but every search scans
-- it: the default limit (4 MB, about 20,000 entries until a VACUUM merges
-- them) made a search 7 ms per column. At 256 kB an insert that fills the
-- list merges it, so a search reads at most a few hundred pending rows
-- (measured: +0.08 ms), whether or not autovacuum runs.
ALTER INDEX "reporting"."assets_search_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 256);
ALTER INDEX "reporting"."tags_value_trgm_idx" SET (fastupdate = on, gin_pending_list_limit = 256);
