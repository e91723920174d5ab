-- The due chain heads of a webhook claim (dispatcher.ts), walked in due order through
-- webhook_deliveries_due_idx and locked as they are read, at most `max_rows` of them.
--
-- The walk is forced by planner settings local to this function: this queue is empty one
-- moment and holds a backlog the next, so its statistics are nearly always wrong. Analyzed
-- while near-empty (reltuples 151), a backlog of 91,000 due rows was read whole, anti-joined
-- and sorted to keep the first few hundred: 130 ms a claim, where the walk takes 4 ms
-- (EXPLAIN ANALYZE on that state). Outside the function the claim plans as usual.
CREATE FUNCTION "reporting"."webhook_due_heads"(saturated int[], max_rows int)
RETURNS TABLE (tid tid, id bigint, webhook_id int, next_attempt_at timestamptz, taken_over boolean)
LANGUAGE sql VOLATILE ROWS 1000
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET enable_sort = off
AS $fn$
  SELECT d.ctid, d.id, d.webhook_id, d.next_attempt_at,
         -- A lease still set when taken is one whose replica stopped before recording the outcome.
         d.lease_until IS NOT NULL
    FROM reporting.webhook_deliveries d
   WHERE d.state = 'pending' AND d.next_attempt_at <= now()
     AND (d.lease_until IS NULL OR d.lease_until < now())
     AND NOT (d.webhook_id = ANY (saturated))
     -- The head of its (webhook, ordering key) chain: per-asset order. OFFSET 0 keeps it a lookup
     -- per row through the chain index (as a join, the planner may read the backlog for it).
     AND NOT EXISTS (
       SELECT 1 FROM reporting.webhook_deliveries e
        WHERE e.webhook_id = d.webhook_id AND e.ordering_key = d.ordering_key AND e.state = 'pending'
          AND (e.event_seq, e.id) < (d.event_seq, d.id)
       OFFSET 0)
   ORDER BY d.next_attempt_at, d.id
   LIMIT max_rows
   FOR UPDATE SKIP LOCKED
$fn$;
