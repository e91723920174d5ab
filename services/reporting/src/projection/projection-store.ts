/**
 * The read model's writes: batch upserts through unnest(), each guarded so an
 * event applies only when it is newer than what the row holds (catalog:
 * entity_version; tracking: (observed_at, seq)). Replays are therefore no-ops,
 * and batches may arrive in any order. The schema is a parameter so the
 * rebuild can fill `reporting_build` with the same code.
 */
import { newerSql, unnestColumns } from "@whereabouts/shared";
import type { SqlRunner } from "../reporting-db.ts";
import type { AssetRow, LocationRow, PositionRow, TagRow } from "./projection-types.ts";

export const LIVE_SCHEMA = "reporting";
export const BUILD_SCHEMA = "reporting_build";
export const RETIRED_SCHEMA = "reporting_retired";
export type ReadModelSchema = typeof LIVE_SCHEMA | typeof BUILD_SCHEMA;
/** Every table of the read model (the rebuild clones and swaps them together). */
export const READ_MODEL_TABLES = ["assets", "positions", "locations", "tags", "counts", "location_rollup_transitions", "location_rollups", "location_closure"] as const;

export interface SnapshotTagRow extends Omit<TagRow, "version" | "deletedAt"> {
  /** entity_version of the asset event that embedded the tag. */
  assetVersion: number;
}

/** A batch's positions as statement parameters, and the SQL that reads them back (`i`: each row's place, from 1). */
const positionColumns = (rows: PositionRow[]) => unnestColumns(rows, "orgId", "assetId", "locationId", "observedAt", "seq", "arrivedAt", "continues");
const POSITION_INPUT = `unnest($1::int[], $2::int[], $3::int[], $4::timestamptz[], $5::bigint[], $6::timestamptz[], $7::bool[]) WITH ORDINALITY
   AS u(org_id, asset_id, location_id, last_seen_at, last_seen_seq, arrived_at, continues, i)`;
/** arrived_at of position `i` against the stored row `stored`: a stay that goes on keeps the stored arrival. */
const arrivalSql = (stored: string) => `CASE WHEN i.continues AND ${stored}.location_id = i.location_id THEN ${stored}.arrived_at ELSE i.arrived_at END`;

export function createProjectionStore(schema: ReadModelSchema) {
  const t = (table: Exclude<(typeof READ_MODEL_TABLES)[number], "counts">) => `"${schema}"."${table}"`;
  /** Bounds the walk up the tree, so even corrupt data could not loop forever. */
  const MAX_DEPTH = 100_000;

  return {
    async upsertLocations(tx: SqlRunner, rows: LocationRow[]): Promise<number> {
      if (!rows.length) return 0;
      return tx.$executeRawUnsafe(
        `INSERT INTO ${t("locations")} AS t (org_id, location_id, version, external_key, valid_from, valid_to, deleted_at,
                                           parent_id, is_zone, max_dwell_s)
         SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[],
                              $8::int[], $9::bool[], $10::int[])
         ON CONFLICT (org_id, location_id) DO UPDATE
            SET version = EXCLUDED.version, external_key = EXCLUDED.external_key, valid_from = EXCLUDED.valid_from,
                valid_to = EXCLUDED.valid_to, deleted_at = EXCLUDED.deleted_at,
                parent_id = EXCLUDED.parent_id, is_zone = EXCLUDED.is_zone, max_dwell_s = EXCLUDED.max_dwell_s
          WHERE t.version < EXCLUDED.version`,
        ...unnestColumns(rows, "orgId", "locationId", "version", "externalKey", "validFrom", "validTo", "deletedAt", "parentId", "isZone", "maxDwellS"),
      );
    },

    /**
     * The summary's tree: each location's parent as its newest event says
     * (only when the locations row now holds that event), then the closure
     * rebuilt for the subtrees of the locations whose parent changed, from
     * the parents as they now stand (so the order of a batch's events does
     * not matter).
     */
    async applyTree(tx: SqlRunner, rows: LocationRow[]): Promise<void> {
      if (!rows.length) return;
      const changed = await tx.$queryRawUnsafe<Array<{ org_id: number; location_id: number }>>(
        `INSERT INTO ${t("location_rollups")} AS r (org_id, location_id, parent_id)
         SELECT u.org_id, u.location_id, u.parent_id
           FROM unnest($1::int[], $2::int[], $3::int[], $4::int[]) AS u(org_id, location_id, parent_id, version)
           JOIN ${t("locations")} l ON l.org_id = u.org_id AND l.location_id = u.location_id AND l.version = u.version
          ORDER BY u.org_id, u.location_id
         ON CONFLICT (org_id, location_id) DO UPDATE SET parent_id = EXCLUDED.parent_id
          WHERE r.parent_id IS DISTINCT FROM EXCLUDED.parent_id
         RETURNING r.org_id, r.location_id`,
        ...unnestColumns(rows, "orgId", "locationId", "parentId", "version"),
      );
      // Every location is its own subtree's root. Its roll-up row may exist before its first
      // event (a position applied first creates it, parent null): a root location's event then
      // changes no parent, so the pair is ensured here rather than only for changed rows.
      await tx.$executeRawUnsafe(
        `INSERT INTO ${t("location_closure")} (org_id, ancestor_id, descendant_id)
         SELECT u.org_id, u.location_id, u.location_id FROM unnest($1::int[], $2::int[]) AS u(org_id, location_id)
          ORDER BY 1, 2
         ON CONFLICT DO NOTHING`,
        ...unnestColumns(rows, "orgId", "locationId"),
      );
      if (!changed.length) return;
      const subtrees = `WITH RECURSIVE sub(org_id, id) AS (
            SELECT * FROM unnest($1::int[], $2::int[])
            UNION
            SELECT r.org_id, r.location_id FROM sub s
              JOIN ${t("location_rollups")} r ON r.org_id = s.org_id AND r.parent_id = s.id)`;
      const params = [changed.map((c) => c.org_id), changed.map((c) => c.location_id)];
      await tx.$executeRawUnsafe(
        `${subtrees}
         DELETE FROM ${t("location_closure")} c USING sub s WHERE c.org_id = s.org_id AND c.descendant_id = s.id`,
        ...params,
      );
      await tx.$executeRawUnsafe(
        `${subtrees},
         up(org_id, descendant_id, ancestor_id, depth) AS (
            SELECT org_id, id, id, 0 FROM sub
            UNION ALL
            SELECT u.org_id, u.descendant_id, r.parent_id, u.depth + 1 FROM up u
              JOIN ${t("location_rollups")} r ON r.org_id = u.org_id AND r.location_id = u.ancestor_id
             WHERE r.parent_id IS NOT NULL AND u.depth < ${MAX_DEPTH})
         INSERT INTO ${t("location_closure")} (org_id, ancestor_id, descendant_id)
         SELECT DISTINCT org_id, ancestor_id, descendant_id FROM up ORDER BY 1, 2, 3
         ON CONFLICT DO NOTHING`,
        ...params,
      );
    },

    async upsertAssets(tx: SqlRunner, rows: AssetRow[]): Promise<number> {
      if (!rows.length) return 0;
      return tx.$executeRawUnsafe(
        `INSERT INTO ${t("assets")} AS t (org_id, asset_id, catalog_version, external_key, name, name_lower, external_key_lower,
                                        valid_from, valid_to, deleted_at)
         SELECT u.org_id, u.asset_id, u.version, u.external_key, u.name, lower(u.name), lower(u.external_key),
                u.valid_from, u.valid_to, u.deleted_at
           FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[])
                AS u(org_id, asset_id, version, external_key, name, valid_from, valid_to, deleted_at)
         ON CONFLICT (org_id, asset_id) DO UPDATE
            SET catalog_version = EXCLUDED.catalog_version, external_key = EXCLUDED.external_key, name = EXCLUDED.name,
                name_lower = EXCLUDED.name_lower, external_key_lower = EXCLUDED.external_key_lower,
                valid_from = EXCLUDED.valid_from, valid_to = EXCLUDED.valid_to, deleted_at = EXCLUDED.deleted_at
          WHERE t.catalog_version < EXCLUDED.catalog_version`,
        ...unnestColumns(rows, "orgId", "assetId", "version", "externalKey", "name", "validFrom", "validTo", "deletedAt"),
      );
    },

    /**
     * Tags seen inside an asset event, inserted only when reporting has no row
     * for them yet and only when that asset event is the one the asset row now
     * holds (a stale snapshot never brings a tag back). Version 0: the tag's
     * own events always win.
     */
    async insertSnapshotTags(tx: SqlRunner, rows: SnapshotTagRow[]): Promise<number> {
      if (!rows.length) return 0;
      return tx.$executeRawUnsafe(
        `INSERT INTO ${t("tags")} (org_id, tag_id, version, asset_id, tag_type, value, value_lower, is_active, valid_from, valid_to, deleted_at)
         SELECT u.org_id, u.tag_id, 0, u.asset_id, u.tag_type, u.value, lower(u.value), u.is_active, u.valid_from, u.valid_to, NULL
           FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::text[], $6::bool[], $7::timestamptz[], $8::timestamptz[], $9::int[])
                AS u(org_id, tag_id, asset_id, tag_type, value, is_active, valid_from, valid_to, asset_version)
           JOIN ${t("assets")} a ON a.org_id = u.org_id AND a.asset_id = u.asset_id AND a.catalog_version = u.asset_version
         ON CONFLICT (org_id, tag_id) DO NOTHING`,
        ...unnestColumns(rows, "orgId", "tagId", "assetId", "tagType", "value", "isActive", "validFrom", "validTo", "assetVersion"),
      );
    },

    async upsertTags(tx: SqlRunner, rows: TagRow[]): Promise<number> {
      if (!rows.length) return 0;
      return tx.$executeRawUnsafe(
        `INSERT INTO ${t("tags")} AS t (org_id, tag_id, version, asset_id, tag_type, value, value_lower, is_active, valid_from, valid_to, deleted_at)
         SELECT u.org_id, u.tag_id, u.version, u.asset_id, u.tag_type, u.value, lower(u.value), u.is_active, u.valid_from, u.valid_to, u.deleted_at
           FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::text[], $6::text[], $7::bool[], $8::timestamptz[], $9::timestamptz[], $10::timestamptz[])
                AS u(org_id, tag_id, version, asset_id, tag_type, value, is_active, valid_from, valid_to, deleted_at)
         ON CONFLICT (org_id, tag_id) DO UPDATE
            SET version = EXCLUDED.version, asset_id = EXCLUDED.asset_id, tag_type = EXCLUDED.tag_type, value = EXCLUDED.value,
                value_lower = EXCLUDED.value_lower, is_active = EXCLUDED.is_active, valid_from = EXCLUDED.valid_from, valid_to = EXCLUDED.valid_to,
                deleted_at = EXCLUDED.deleted_at
          WHERE t.version < EXCLUDED.version`,
        ...unnestColumns(rows, "orgId", "tagId", "version", "assetId", "tagType", "value", "isActive", "validFrom", "validTo", "deletedAt"),
      );
    },

    /**
     * Newest position wins: (observed_at, seq); a late scan changes nothing.
     * The narrow positions table takes every scan; the assets row is touched
     * only by an asset's first position (`scanned`, which makes it a report
     * row), inserted as a stub when catalog's event has not arrived yet.
     *
     * Almost every row of a batch advances a stored position: those go through
     * a plain UPDATE, which costs less than INSERT ... ON CONFLICT (no
     * speculative probe, no row-lock WAL record before each update: 1-2 µs a
     * row of 20-26). The few it did not change (an asset's first position, or
     * a row no newer than the stored one) then take the upsert, which inserts
     * the first and leaves the other alone.
     */
    async upsertPositions(tx: SqlRunner, rows: PositionRow[]): Promise<void> {
      if (!rows.length) return;
      // arrived_at (alerts seed their state from it when an organization turns them on): arrivalSql.
      const left = await tx.$queryRawUnsafe<Array<{ i: number }>>(
        `WITH input AS (
           SELECT * FROM ${POSITION_INPUT}
         ), advanced AS (
           UPDATE ${t("positions")} AS t
              SET location_id = i.location_id, last_seen_at = i.last_seen_at, last_seen_seq = i.last_seen_seq, arrived_at = ${arrivalSql("t")}
             FROM input i
            WHERE t.org_id = i.org_id AND t.asset_id = i.asset_id
              AND ${newerSql({ at: "t.last_seen_at", seq: "t.last_seen_seq" }, { at: "i.last_seen_at", seq: "i.last_seen_seq" })}
           RETURNING t.org_id, t.asset_id
         )
         SELECT i.i::int AS i FROM input i
          WHERE NOT EXISTS (SELECT 1 FROM advanced a WHERE a.org_id = i.org_id AND a.asset_id = i.asset_id)`,
        ...positionColumns(rows),
      );
      if (!left.length) return;
      // The read of the stored row is safe: only the leader's tracking consumer writes here.
      await tx.$executeRawUnsafe(
        `WITH input AS (
           SELECT * FROM ${POSITION_INPUT}
         ), placed AS (
           INSERT INTO ${t("positions")} AS t (org_id, asset_id, location_id, last_seen_at, last_seen_seq, arrived_at)
           SELECT i.org_id, i.asset_id, i.location_id, i.last_seen_at, i.last_seen_seq, ${arrivalSql("s")}
             FROM input i LEFT JOIN ${t("positions")} s ON s.org_id = i.org_id AND s.asset_id = i.asset_id
            ORDER BY i.org_id, i.asset_id
           ON CONFLICT (org_id, asset_id) DO UPDATE
              SET location_id = EXCLUDED.location_id, last_seen_at = EXCLUDED.last_seen_at, last_seen_seq = EXCLUDED.last_seen_seq,
                  arrived_at = EXCLUDED.arrived_at
            WHERE ${newerSql({ at: "t.last_seen_at", seq: "t.last_seen_seq" }, { at: "EXCLUDED.last_seen_at", seq: "EXCLUDED.last_seen_seq" })}
           RETURNING t.org_id, t.asset_id, (t.xmax = 0) AS first
         )
         INSERT INTO ${t("assets")} AS a (org_id, asset_id, scanned)
         SELECT org_id, asset_id, true FROM placed WHERE first ORDER BY org_id, asset_id
         ON CONFLICT (org_id, asset_id) DO UPDATE SET scanned = true WHERE NOT a.scanned`,
        ...positionColumns(left.map(({ i }) => rows[i - 1]!)),
      );
    },
  };
}
export type ProjectionStore = ReturnType<typeof createProjectionStore>;
