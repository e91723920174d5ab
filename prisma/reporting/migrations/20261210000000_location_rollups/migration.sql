-- Location roll-up (GET /api/v1/locations/<id>/summary, EXTENSIONS.md section 5).
--
-- location_rollups: per location, its parent (from catalog's location events)
-- and two figures kept as positions and assets change, so that a summary never
-- visits the assets of a subtree:
--   assets_effective  live assets placed here that are currently effective
--                     (known to catalog, not deleted, valid_from <= now <
--                     valid_to); exact for "now" up to the transitions below
--                     still waiting for the loop;
--   last_seen_max     an upper bound of the newest last seen among assets
--                     placed here (it only grows): reads probe the real value
--                     of the few locations with the highest bounds.
-- location_rollup_transitions: the future validity boundaries of placed assets
-- (an asset becoming effective at valid_from: +1, ceasing at valid_to: -1),
-- at most two per asset, each at the location the asset is placed at. Nothing
-- is written when a boundary passes: reporting's transitions loop applies the
-- due rows to assets_effective and deletes them (a count may lag a boundary by
-- the loop's period, 1 s by default).
--
-- Invariant, per placed asset: what assets_effective holds for it equals its
-- final contribution (live, known, no valid_to) minus its pending transitions'
-- deltas. The triggers rely on it to take an asset's contribution out without
-- evaluating the clock, so a boundary falling due between two writes, or the
-- loop applying one concurrently, never skews a count.
-- location_closure: every (ancestor, descendant) pair of the tree, each
-- location its own ancestor, so a subtree is one index range.
CREATE TABLE "reporting"."location_rollups" (
    "org_id" INTEGER NOT NULL,
    "location_id" INTEGER NOT NULL,
    "parent_id" INTEGER,
    "assets_effective" INTEGER NOT NULL DEFAULT 0,
    "last_seen_max" TIMESTAMPTZ(6),

    CONSTRAINT "location_rollups_pkey" PRIMARY KEY ("org_id", "location_id")
);
CREATE INDEX "location_rollups_org_id_parent_id_idx" ON "reporting"."location_rollups"("org_id", "parent_id");

CREATE TABLE "reporting"."location_rollup_transitions" (
    "org_id" INTEGER NOT NULL,
    "asset_id" INTEGER NOT NULL,
    "at" TIMESTAMPTZ(6) NOT NULL,
    "location_id" INTEGER NOT NULL,
    "delta" SMALLINT NOT NULL,

    CONSTRAINT "location_rollup_transitions_pkey" PRIMARY KEY ("org_id", "asset_id", "at")
);
CREATE INDEX "location_rollup_transitions_at_idx" ON "reporting"."location_rollup_transitions"("at");

CREATE TABLE "reporting"."location_closure" (
    "org_id" INTEGER NOT NULL,
    "ancestor_id" INTEGER NOT NULL,
    "descendant_id" INTEGER NOT NULL,

    CONSTRAINT "location_closure_pkey" PRIMARY KEY ("org_id", "ancestor_id", "descendant_id")
);
CREATE INDEX "location_closure_org_id_descendant_id_idx" ON "reporting"."location_closure"("org_id", "descendant_id");

-- An asset row's part in the roll-up ($1 the alias of an assets row, possibly
-- absent through a LEFT JOIN; absent or unknown to catalog counts nothing).
--   final:   what it contributes once every boundary has passed;
--   now:     what it contributes at the statement's now();
--   pending: its boundaries after now(), as (at, delta) rows.
CREATE FUNCTION "reporting"."rollup_final"(alias text) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
    SELECT format('(%1$s.external_key IS NOT NULL AND %1$s.deleted_at IS NULL AND %1$s.valid_to IS NULL)', alias)
$fn$;
CREATE FUNCTION "reporting"."rollup_now"(alias text) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
    SELECT format('(%1$s.external_key IS NOT NULL AND %1$s.deleted_at IS NULL AND %1$s.valid_from <= now()
                    AND (%1$s.valid_to IS NULL OR %1$s.valid_to > now()))', alias)
$fn$;
CREATE FUNCTION "reporting"."rollup_pending"(alias text) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
    SELECT format('SELECT b.at, b.delta FROM (VALUES (%1$s.valid_from, 1::smallint), (%1$s.valid_to, -1::smallint)) b(at, delta)
                    WHERE %1$s.external_key IS NOT NULL AND %1$s.deleted_at IS NULL AND b.at > now()
                      AND (%1$s.valid_to IS NULL OR %1$s.valid_to > %1$s.valid_from)', alias)
$fn$;

-- Positions: a first placement adds the asset's contribution now and its
-- pending boundaries; a move carries its contribution (final minus pending,
-- no clock) and its pending boundaries to the new location. A repeated read
-- only raises last_seen_max. The assets are share-locked first: a concurrent
-- catalog batch changing whether one counts then either waits for this one or
-- is waited for, never both reading the other's old state. Tables in the
-- trigger's own schema, so the rebuild's copies keep their own figures.
CREATE FUNCTION "reporting"."positions_rollups_sync"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format(
        'SELECT count(*) FROM (SELECT 1 FROM %1$I.assets a JOIN new_rows n ON n.org_id = a.org_id AND n.asset_id = a.asset_id
           ORDER BY a.org_id, a.asset_id FOR SHARE OF a) locked', TG_TABLE_SCHEMA);
    IF TG_OP = 'INSERT' THEN
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
$fn$;

CREATE TRIGGER "positions_rollups_insert" AFTER INSERT ON "reporting"."positions"
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."positions_rollups_sync"();
CREATE TRIGGER "positions_rollups_update" AFTER UPDATE ON "reporting"."positions"
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."positions_rollups_sync"();

-- Assets starting or ceasing to count (catalog data arriving, soft delete,
-- validity changed) at the location they are placed at: the old row's
-- contribution leaves (final minus the pending rows deleted), the new row's
-- joins (as of now, plus its pending boundaries). Rows whose counting fields
-- are unchanged (a rename, the scanned flag) are skipped. An INSERT has no old
-- row and a DELETE no new one: an empty stand-in counts nothing.
CREATE FUNCTION "reporting"."assets_rollups_sync"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    changed text;
BEGIN
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
$fn$;

CREATE TRIGGER "assets_rollups_insert" AFTER INSERT ON "reporting"."assets"
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_rollups_sync"();
CREATE TRIGGER "assets_rollups_update" AFTER UPDATE ON "reporting"."assets"
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_rollups_sync"();
CREATE TRIGGER "assets_rollups_delete" AFTER DELETE ON "reporting"."assets"
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "reporting"."assets_rollups_sync"();

-- What the read model already holds. Parents are not in it yet: until
-- `npm run -s reporting:rebuild` replays the location events, every known
-- location is its own root.
INSERT INTO "reporting"."location_rollups" ("org_id", "location_id", "assets_effective", "last_seen_max")
SELECT p."org_id", p."location_id",
       count(*) FILTER (WHERE a."external_key" IS NOT NULL AND a."deleted_at" IS NULL AND a."valid_from" <= now()
                          AND (a."valid_to" IS NULL OR a."valid_to" > now())),
       max(p."last_seen_at")
  FROM "reporting"."positions" p
  LEFT JOIN "reporting"."assets" a ON a."org_id" = p."org_id" AND a."asset_id" = p."asset_id"
 GROUP BY p."org_id", p."location_id";
INSERT INTO "reporting"."location_rollup_transitions" ("org_id", "asset_id", "at", "location_id", "delta")
SELECT p."org_id", p."asset_id", b."at", p."location_id", b."delta"
  FROM "reporting"."positions" p
  JOIN "reporting"."assets" a ON a."org_id" = p."org_id" AND a."asset_id" = p."asset_id"
 CROSS JOIN LATERAL (VALUES (a."valid_from", 1::smallint), (a."valid_to", -1::smallint)) b("at", "delta")
 WHERE a."external_key" IS NOT NULL AND a."deleted_at" IS NULL AND b."at" > now()
   AND (a."valid_to" IS NULL OR a."valid_to" > a."valid_from");
INSERT INTO "reporting"."location_rollups" ("org_id", "location_id")
SELECT "org_id", "location_id" FROM "reporting"."locations" ON CONFLICT DO NOTHING;
INSERT INTO "reporting"."location_closure" ("org_id", "ancestor_id", "descendant_id")
SELECT "org_id", "location_id", "location_id" FROM "reporting"."location_rollups";
