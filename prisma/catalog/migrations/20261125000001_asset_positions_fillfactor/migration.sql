-- Position rows are rewritten by moves: room on each page keeps a row's new
-- version on its page (and lets HOT pruning reclaim the old one without VACUUM).
ALTER TABLE "catalog"."asset_positions" SET (fillfactor = 70);
