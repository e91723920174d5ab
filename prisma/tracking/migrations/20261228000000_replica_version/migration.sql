-- Per organization, a token of its replicated assets and tags: replaced (a
-- random value, so a restored database never repeats one a process still
-- holds) whenever a catalog batch writes any of them. Scan ingestion keeps
-- the tags it resolved in memory while the token is unchanged.
ALTER TABLE "tracking"."orgs" ADD COLUMN "replica_version" BIGINT NOT NULL DEFAULT 0;
