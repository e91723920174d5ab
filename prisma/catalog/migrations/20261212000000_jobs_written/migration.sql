-- A bulk job's rows committed (with its counts and its events in the outbox),
-- its events still being published: it shows `running` until they are, and a
-- worker taking it over only publishes what is left, never writes it again.
ALTER TABLE "catalog"."jobs" ADD COLUMN "written_at" TIMESTAMPTZ(3);
