-- Reporting's positions trigger planned its dynamic statements on both halves
-- of every scan batch's upsert, the empty one included, and share-locked
-- assets even when no position moved. It now returns at once on an empty
-- half and takes the locks only for a move.
CREATE OR REPLACE FUNCTION reporting.positions_rollups_sync()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- The positions upsert fires both statement triggers; one side is most
    -- often empty (every batch after an asset's first scan inserts nothing).
    -- Checked with static SQL: the dynamic statements are planned on every call.
    IF NOT EXISTS (SELECT 1 FROM new_rows) THEN RETURN NULL; END IF;
    IF TG_OP = 'INSERT' THEN
        EXECUTE format(
            'SELECT count(*) FROM (SELECT 1 FROM %1$I.assets a JOIN new_rows n ON n.org_id = a.org_id AND n.asset_id = a.asset_id
               ORDER BY a.org_id, a.asset_id FOR SHARE OF a) locked', TG_TABLE_SCHEMA);
        EXECUTE format(
            'WITH scheduled AS (
               INSERT INTO %1$I.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
               SELECT n.org_id, n.asset_id, b.at, n.location_id, b.delta
                 FROM new_rows n JOIN %1$I.assets a ON a.org_id = n.org_id AND a.asset_id = n.asset_id
                 CROSS JOIN LATERAL (%2$s) b)
             INSERT INTO %1$I.location_rollups AS r (org_id, location_id, assets_effective, last_seen_max)
             SELECT n.org_id, n.location_id, count(*) FILTER (WHERE %3$s), max(n.last_seen_at)
               FROM new_rows n LEFT JOIN %1$I.assets a ON a.org_id = n.org_id AND a.asset_id = n.asset_id
              GROUP BY n.org_id, n.location_id
              ORDER BY n.org_id, n.location_id
             ON CONFLICT (org_id, location_id) DO UPDATE
                SET assets_effective = r.assets_effective + EXCLUDED.assets_effective,
                    last_seen_max = GREATEST(r.last_seen_max, EXCLUDED.last_seen_max)',
            TG_TABLE_SCHEMA, reporting.rollup_pending('a'), reporting.rollup_now('a'));
        RETURN NULL;
    END IF;
    -- Only a move reads the asset's validity (to carry counts): a batch of
    -- repeated reads at the same place locks nothing. A row per asset on each
    -- side, so a moved asset is one of the new rows not among the old. Compared
    -- as sets (EXCEPT hashes or sorts): this plan is made once and kept, so it
    -- must not be a join the first small call chose.
    IF EXISTS (SELECT org_id, asset_id, location_id FROM new_rows EXCEPT SELECT org_id, asset_id, location_id FROM old_rows) THEN
        EXECUTE format(
            'SELECT count(*) FROM (SELECT 1 FROM %1$I.assets a JOIN new_rows n ON n.org_id = a.org_id AND n.asset_id = a.asset_id
               JOIN old_rows o ON o.org_id = n.org_id AND o.asset_id = n.asset_id
              WHERE o.location_id <> n.location_id
              ORDER BY a.org_id, a.asset_id FOR SHARE OF a) locked', TG_TABLE_SCHEMA);
    END IF;
    EXECUTE format(
        'WITH moved AS (
           SELECT n.org_id, n.asset_id, o.location_id AS from_id, n.location_id AS to_id
             FROM new_rows n JOIN old_rows o ON o.org_id = n.org_id AND o.asset_id = n.asset_id
            WHERE o.location_id <> n.location_id),
         carried AS (
           UPDATE %1$I.location_rollup_transitions t SET location_id = m.to_id
             FROM moved m WHERE t.org_id = m.org_id AND t.asset_id = m.asset_id
           RETURNING t.org_id, t.asset_id, t.delta),
         share AS (
           SELECT m.org_id, m.from_id, m.to_id,
                  COALESCE(%2$s, false)::int - COALESCE((SELECT sum(c.delta) FROM carried c
                                                           WHERE c.org_id = m.org_id AND c.asset_id = m.asset_id), 0) AS n
             FROM moved m LEFT JOIN %1$I.assets a ON a.org_id = m.org_id AND a.asset_id = m.asset_id),
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
        TG_TABLE_SCHEMA, reporting.rollup_final('a'));
    RETURN NULL;
END
$function$;
