-- A catalog create reached reporting's asset triggers as an upsert, so both
-- the INSERT and the UPDATE statement triggers ran, and each planned its
-- dynamic statements (about 2 ms a batch) to find that an unscanned asset
-- counts nowhere. Each trigger now returns at once when its transition rows
-- cannot change a count or a roll-up.
CREATE OR REPLACE FUNCTION reporting.assets_counts_sync()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    changed text;
BEGIN
    -- Only scanned assets are counted: a statement whose rows were and stay
    -- unscanned (a catalog create, or an upsert's empty INSERT or UPDATE
    -- half), or whose updates change none of the counted predicates, changes
    -- nothing. Checked with static SQL first: the dynamic statement below is
    -- planned again on every call (about 1 ms).
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE scanned) THEN RETURN NULL; END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_rows WHERE scanned) THEN RETURN NULL; END IF;
    -- An update changes a count only if the scanned rows differ in what is
    -- counted. Compared as sets (EXCEPT hashes or sorts): this plan is made
    -- once and kept, so it must not be a join the first small call chose.
    ELSIF NOT EXISTS (SELECT org_id, asset_id, external_key IS NULL, valid_to IS NULL, deleted_at IS NULL FROM new_rows WHERE scanned
                      EXCEPT SELECT org_id, asset_id, external_key IS NULL, valid_to IS NULL, deleted_at IS NULL FROM old_rows WHERE scanned)
      AND NOT EXISTS (SELECT org_id, asset_id, external_key IS NULL, valid_to IS NULL, deleted_at IS NULL FROM old_rows WHERE scanned
                      EXCEPT SELECT org_id, asset_id, external_key IS NULL, valid_to IS NULL, deleted_at IS NULL FROM new_rows WHERE scanned) THEN
        RETURN NULL;
    END IF;
    changed := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT 1 AS sign, * FROM new_rows'
        WHEN 'DELETE' THEN 'SELECT -1 AS sign, * FROM old_rows'
        ELSE 'SELECT 1 AS sign, * FROM new_rows UNION ALL SELECT -1, * FROM old_rows'
    END;
    EXECUTE format(
        'INSERT INTO %I.counts AS c (org_id, open_live, open_all)
         SELECT org_id, sum(sign * (deleted_at IS NULL)::int), sum(sign)
           FROM (%s) r
          WHERE scanned AND external_key IS NOT NULL AND valid_to IS NULL
          GROUP BY org_id
         HAVING sum(sign * (deleted_at IS NULL)::int) <> 0 OR sum(sign) <> 0
          ORDER BY org_id
         ON CONFLICT (org_id) DO UPDATE
            SET open_live = c.open_live + EXCLUDED.open_live, open_all = c.open_all + EXCLUDED.open_all',
        TG_TABLE_SCHEMA, changed);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION reporting.assets_rollups_sync()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    changed text;
BEGIN
    -- Roll-ups count positioned assets, and an asset is scanned from its first
    -- position on: a statement with no scanned row (a catalog create, or an
    -- upsert's empty INSERT or UPDATE half), or whose updates change no
    -- validity or liveness, has nothing to do. Checked with static SQL first:
    -- the dynamic statements below are planned again on every call.
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE scanned) THEN RETURN NULL; END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_rows WHERE scanned) THEN RETURN NULL; END IF;
    -- Compared as sets (EXCEPT hashes or sorts): this plan is made once and
    -- kept, so it must not be a join the first small call chose.
    ELSIF NOT EXISTS (SELECT org_id, asset_id, external_key IS NULL, deleted_at IS NULL, valid_from, valid_to FROM new_rows WHERE scanned
                      EXCEPT SELECT org_id, asset_id, external_key IS NULL, deleted_at IS NULL, valid_from, valid_to FROM old_rows WHERE scanned)
      AND NOT EXISTS (SELECT org_id, asset_id, external_key IS NULL, deleted_at IS NULL, valid_from, valid_to FROM old_rows WHERE scanned
                      EXCEPT SELECT org_id, asset_id, external_key IS NULL, deleted_at IS NULL, valid_from, valid_to FROM new_rows WHERE scanned) THEN
        RETURN NULL;
    END IF;
    changed := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT n.org_id, n.asset_id FROM new_rows n'
        WHEN 'DELETE' THEN 'SELECT o.org_id, o.asset_id FROM old_rows o'
        ELSE 'SELECT n.org_id, n.asset_id FROM new_rows n JOIN old_rows o ON o.org_id = n.org_id AND o.asset_id = n.asset_id
               WHERE (n.external_key IS NULL) <> (o.external_key IS NULL) OR (n.deleted_at IS NULL) <> (o.deleted_at IS NULL)
                  OR n.valid_from IS DISTINCT FROM o.valid_from OR n.valid_to IS DISTINCT FROM o.valid_to'
    END;
    EXECUTE format(
        'WITH changed AS MATERIALIZED (%2$s),
         dropped AS (
           DELETE FROM %1$I.location_rollup_transitions t USING changed c
            WHERE t.org_id = c.org_id AND t.asset_id = c.asset_id
           RETURNING t.org_id, t.location_id, t.delta),
         changes AS (
           SELECT org_id, location_id, delta::int AS n FROM dropped
           UNION ALL
           SELECT p.org_id, p.location_id, COALESCE(%4$s, false)::int * -1 + COALESCE(%5$s, false)::int
             FROM changed c JOIN %1$I.positions p ON p.org_id = c.org_id AND p.asset_id = c.asset_id
             LEFT JOIN %6$s o ON o.org_id = c.org_id AND o.asset_id = c.asset_id
             LEFT JOIN %7$s n ON n.org_id = c.org_id AND n.asset_id = c.asset_id)
         INSERT INTO %1$I.location_rollups AS r (org_id, location_id, assets_effective)
         SELECT org_id, location_id, sum(n) FROM changes
          GROUP BY org_id, location_id
         HAVING sum(n) <> 0
          ORDER BY org_id, location_id
         ON CONFLICT (org_id, location_id) DO UPDATE SET assets_effective = r.assets_effective + EXCLUDED.assets_effective',
        TG_TABLE_SCHEMA, changed, TG_OP, reporting.rollup_final('o'), reporting.rollup_now('n'),
        CASE WHEN TG_OP = 'INSERT' THEN '(SELECT * FROM new_rows WHERE false)' ELSE 'old_rows' END,
        CASE WHEN TG_OP = 'DELETE' THEN '(SELECT * FROM old_rows WHERE false)' ELSE 'new_rows' END);
    IF TG_OP <> 'DELETE' THEN
        EXECUTE format(
            'INSERT INTO %1$I.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
             SELECT c.org_id, c.asset_id, b.at, p.location_id, b.delta
               FROM (%2$s) c
               JOIN new_rows n ON n.org_id = c.org_id AND n.asset_id = c.asset_id
               JOIN %1$I.positions p ON p.org_id = c.org_id AND p.asset_id = c.asset_id
              CROSS JOIN LATERAL (%3$s) b
              ORDER BY 1, 2, 3',
            TG_TABLE_SCHEMA, changed, reporting.rollup_pending('n'));
    END IF;
    RETURN NULL;
END
$function$;
