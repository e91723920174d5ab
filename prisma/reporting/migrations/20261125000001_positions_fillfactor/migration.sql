-- Position rows are rewritten by every scan batch: room on each page keeps a
-- row's new version on its page (and lets HOT pruning reclaim the old one
-- without VACUUM).
ALTER TABLE "reporting"."positions" SET (fillfactor = 70);
