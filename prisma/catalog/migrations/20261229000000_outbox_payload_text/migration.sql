-- The outbox keeps each event as the JSON text the relay publishes, not as
-- jsonb: nothing reads inside it, and jsonb parsed every payload on the way
-- in and printed it again on the way out (a bulk job of 100,000 assets writes
-- 128 MB of event JSON: 3.7 s to store as jsonb, 0.8 s as lz4-compressed text,
-- and 1.6 s against 0.4 s to read back). lz4 where the server has it (PG 14+
-- built with lz4, as Debian's is); pglz otherwise.
ALTER TABLE "catalog"."outbox_events" ALTER COLUMN "payload" TYPE TEXT USING "payload"::text;
DO $$
BEGIN
  ALTER TABLE "catalog"."outbox_events" ALTER COLUMN "payload" SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR undefined_object THEN
  RAISE NOTICE 'lz4 is not available: outbox payloads stay compressed with pglz';
END $$;
