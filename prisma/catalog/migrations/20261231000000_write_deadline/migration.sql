-- The deadline of a write done in one statement (its own transaction): the
-- statement ends by calling this, so that a write whose caller has given up
-- (packages/shared/src/deadline.ts) rolls back instead of committing unseen,
-- as a transaction does when it checks the deadline before COMMIT. The
-- deadline is epoch milliseconds; NULL is none. SQLSTATE P0D01 is the
-- catalog's "past the deadline" (services/catalog/src/db/catalog-db.ts).
CREATE OR REPLACE FUNCTION "catalog"."within_deadline"(deadline_ms double precision) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF deadline_ms IS NOT NULL AND extract(epoch FROM clock_timestamp()) * 1000 >= deadline_ms THEN
    RAISE EXCEPTION 'the request took longer than its deadline' USING ERRCODE = 'P0D01';
  END IF;
  RETURN true;
END $$;
