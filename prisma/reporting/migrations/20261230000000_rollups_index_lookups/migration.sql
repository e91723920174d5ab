-- The positions roll-up trigger read the assets it needed by a hash join over
-- a sequential scan of the whole assets table: a scan batch of 4,500 reads
-- with 450 moves hashed all 20,000 assets twice (about 17 of the trigger's
-- 57 ms), and that part grows with the organization, not the batch. The
-- moved rows are now found once (one join of the transition tables, kept in
-- arrays instead of the EXCEPT check and two more joins) and every asset is
-- read by its primary key: a LATERAL subquery with FOR SHARE and a scalar
-- subquery cannot be turned into a hash join. A batch with no move only
-- raises last_seen_max. The locks are still taken in (org_id, asset_id)
-- order, before the statement that reads the assets' validity.
CREATE OR REPLACE FUNCTION "reporting"."positions_rollups_sync"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    moved_org int[];
    moved_asset int[];
    moved_from int[];
    moved_to int[];
BEGIN
    -- The positions upsert fires both statement triggers; one side is most
    -- often empty (every batch after an asset's first scan inserts nothing).
    IF NOT EXISTS (SELECT 1 FROM new_rows) THEN RETURN NULL; END IF;
    IF TG_OP = 'INSERT' THEN
        -- First placements: sorted, then each asset by its key.
        EXECUTE format(
            'SELECT count(*) FROM (SELECT org_id, asset_id FROM new_rows ORDER BY org_id, asset_id) n
               CROSS JOIN LATERAL (SELECT 1 FROM %1$I.assets a WHERE a.org_id = n.org_id AND a.asset_id = n.asset_id FOR SHARE) locked',
            TG_TABLE_SCHEMA);
        EXECUTE format(
            'WITH placed AS (
               SELECT n.org_id, n.asset_id, n.location_id, n.last_seen_at, a.*
                 FROM new_rows n
                 LEFT JOIN LATERAL (SELECT a.external_key, a.deleted_at, a.valid_from, a.valid_to FROM %1$I.assets a
                                     WHERE a.org_id = n.org_id AND a.asset_id = n.asset_id OFFSET 0) a ON true),
             scheduled AS (
               INSERT INTO %1$I.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
               SELECT a.org_id, a.asset_id, b.at, a.location_id, b.delta
                 FROM placed a CROSS JOIN LATERAL (%2$s) b)
             INSERT INTO %1$I.location_rollups AS r (org_id, location_id, assets_effective, last_seen_max)
             SELECT a.org_id, a.location_id, count(*) FILTER (WHERE %3$s), max(a.last_seen_at)
               FROM placed a
              GROUP BY a.org_id, a.location_id
              ORDER BY a.org_id, a.location_id
             ON CONFLICT (org_id, location_id) DO UPDATE
                SET assets_effective = r.assets_effective + EXCLUDED.assets_effective,
                    last_seen_max = GREATEST(r.last_seen_max, EXCLUDED.last_seen_max)',
            TG_TABLE_SCHEMA, reporting.rollup_pending('a'), reporting.rollup_now('a'));
        RETURN NULL;
    END IF;
    -- A row per asset on each side; a moved asset is a new row whose old row
    -- was elsewhere. Dynamic: planned on this batch's sizes, never a nested
    -- loop a first small batch chose.
    EXECUTE
        'SELECT array_agg(n.org_id ORDER BY n.org_id, n.asset_id), array_agg(n.asset_id ORDER BY n.org_id, n.asset_id),
                array_agg(o.location_id ORDER BY n.org_id, n.asset_id), array_agg(n.location_id ORDER BY n.org_id, n.asset_id)
           FROM new_rows n JOIN old_rows o ON o.org_id = n.org_id AND o.asset_id = n.asset_id
          WHERE o.location_id <> n.location_id'
        INTO moved_org, moved_asset, moved_from, moved_to;
    IF moved_org IS NULL THEN
        -- Repeated reads at the same place (most batches' most rows) only raise last seen.
        EXECUTE format(
            'INSERT INTO %1$I.location_rollups AS r (org_id, location_id, assets_effective, last_seen_max)
             SELECT org_id, location_id, 0, max(last_seen_at) FROM new_rows
              GROUP BY org_id, location_id
              ORDER BY org_id, location_id
             ON CONFLICT (org_id, location_id) DO UPDATE
                SET last_seen_max = GREATEST(r.last_seen_max, EXCLUDED.last_seen_max)',
            TG_TABLE_SCHEMA);
        RETURN NULL;
    END IF;
    -- Only a move reads the asset's validity (to carry counts): lock those.
    EXECUTE format(
        'SELECT count(*) FROM unnest($1::int[], $2::int[]) AS m(org_id, asset_id)
           CROSS JOIN LATERAL (SELECT 1 FROM %1$I.assets a WHERE a.org_id = m.org_id AND a.asset_id = m.asset_id FOR SHARE) locked',
        TG_TABLE_SCHEMA)
        USING moved_org, moved_asset;
    EXECUTE format(
        'WITH moved AS (
           SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::int[]) AS m(org_id, asset_id, from_id, to_id)),
         carried AS (
           UPDATE %1$I.location_rollup_transitions t SET location_id = m.to_id
             FROM moved m WHERE t.org_id = m.org_id AND t.asset_id = m.asset_id
           RETURNING t.org_id, t.asset_id, t.delta),
         share AS (
           SELECT m.org_id, m.from_id, m.to_id,
                  COALESCE((SELECT %2$s FROM %1$I.assets a WHERE a.org_id = m.org_id AND a.asset_id = m.asset_id), false)::int
                  - COALESCE((SELECT sum(c.delta) FROM carried c WHERE c.org_id = m.org_id AND c.asset_id = m.asset_id), 0) AS n
             FROM moved m),
         changes AS (
           SELECT org_id, from_id AS location_id, -n AS n, NULL::timestamptz AS seen FROM share
           UNION ALL SELECT org_id, to_id, n, NULL FROM share
           UNION ALL SELECT org_id, location_id, 0, max(last_seen_at) FROM new_rows GROUP BY org_id, location_id)
         INSERT INTO %1$I.location_rollups AS r (org_id, location_id, assets_effective, last_seen_max)
         SELECT org_id, location_id, sum(n), max(seen) FROM changes
          GROUP BY org_id, location_id
          ORDER BY org_id, location_id
         ON CONFLICT (org_id, location_id) DO UPDATE
            SET assets_effective = r.assets_effective + EXCLUDED.assets_effective,
                last_seen_max = GREATEST(r.last_seen_max, EXCLUDED.last_seen_max)',
        TG_TABLE_SCHEMA, reporting.rollup_final('a'))
        USING moved_org, moved_asset, moved_from, moved_to;
    RETURN NULL;
END
$fn$;
