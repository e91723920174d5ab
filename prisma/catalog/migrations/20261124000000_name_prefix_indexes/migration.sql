-- Names may hold up to 1,000 characters (DECISIONS.md), up to 4,000 bytes of
-- UTF-8: more than a btree index entry can hold (2,704 bytes), so an index on
-- the whole name refused such rows with an error. The name sort indexes hold
-- the first 500 characters (at most 2,000 bytes) instead; the lists order by
-- (left(name, 500), name, id), which is the order of (name, id) in a
-- byte-order collation, and the index still serves the first key.

DROP INDEX "catalog"."assets_org_id_name_id_idx";
DROP INDEX "catalog"."locations_org_id_name_id_idx";
DROP INDEX "catalog"."locations_org_id_parent_id_name_id_idx";

CREATE INDEX "assets_org_id_name_prefix_id_idx" ON "catalog"."assets" ("org_id", left("name", 500), "id");
CREATE INDEX "locations_org_id_name_prefix_id_idx" ON "catalog"."locations" ("org_id", left("name", 500), "id");
CREATE INDEX "locations_org_id_parent_id_name_prefix_id_idx" ON "catalog"."locations" ("org_id", "parent_id", left("name", 500), "id");
