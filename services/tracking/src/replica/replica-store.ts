/**
 * Tracking's replica of catalog facts (organizations, locations, assets,
 * tags): set-based, version-checked upserts fed by the CATALOG stream, and the
 * resolution queries scans run against it.
 */
import { effectiveSql, unnestColumns } from "@whereabouts/shared";
import { execute, query, type Db } from "../db/tracking-db.ts";

export interface LocationRow {
  org_id: number;
  id: number;
  external_key: string;
  valid_from: string;
  valid_to: string | null;
  deleted_at: string | null;
  version: number;
}

export interface AssetRow {
  org_id: number;
  id: number;
  deleted_at: string | null;
  version: number;
}

export interface TagRow {
  org_id: number;
  id: number;
  tag_type: string;
  value: string;
  owner_type: "asset" | "location";
  owner_id: number;
  is_active: boolean;
  valid_from: string;
  valid_to: string | null;
  deleted_at: string | null;
  /** entity_version; 0 for a tag known only from its owner's embedded array. */
  version: number;
}

/** The settings of an organization tracking acts on (smoothing, history retention). */
export interface OrgSettingsRow {
  id: number;
  smoothing_window_s: number;
  history_retention_days: number | null;
  version: number;
}

/** A scan point: (source, antenna) to a location; antenna null is the source's default. */
export interface ScanPointRow {
  org_id: number;
  id: number;
  source: string;
  antenna: number | null;
  location_id: number;
  valid_from: string;
  valid_to: string | null;
  deleted_at: string | null;
  version: number;
}

export interface ReplicaChanges {
  orgIds: number[];
  scanPoints: ScanPointRow[];
  settings: OrgSettingsRow[];
  locations: LocationRow[];
  assets: AssetRow[];
  tags: TagRow[];
  embeddedTags: TagRow[];
  /** Highest CATALOG stream sequence in the batch. */
  streamSeq: number;
}

export const CATALOG_OFFSET = "catalog";

/** Applies one batch of catalog facts; each entity only when its version is newer. */
export async function applyReplicaChanges(tx: Db, changes: ReplicaChanges): Promise<void> {
  if (changes.orgIds.length) {
    await execute(tx, `INSERT INTO tracking.orgs (id) SELECT unnest($1::int[]) ON CONFLICT DO NOTHING`, [changes.orgIds]);
  }
  if (changes.settings.length) {
    await execute(
      tx,
      `UPDATE tracking.orgs o
          SET smoothing_window_s = x.smoothing_window_s, history_retention_days = x.history_retention_days, settings_version = x.version
         FROM jsonb_to_recordset($1::jsonb) AS x(id int, smoothing_window_s int, history_retention_days int, version int)
        WHERE o.id = x.id AND x.version > o.settings_version`,
      [JSON.stringify(changes.settings)],
    );
  }
  if (changes.locations.length) {
    await execute(
      tx,
      `INSERT INTO tracking.locations AS t (org_id, id, external_key, valid_from, valid_to, deleted_at, version)
       SELECT x.org_id, x.id, x.external_key, x.valid_from, x.valid_to, x.deleted_at, x.version
         FROM jsonb_to_recordset($1::jsonb) AS x(org_id int, id int, external_key text, valid_from timestamptz,
                                                 valid_to timestamptz, deleted_at timestamptz, version int)
        ORDER BY x.org_id, x.id
       ON CONFLICT (org_id, id) DO UPDATE
          SET external_key = excluded.external_key, valid_from = excluded.valid_from, valid_to = excluded.valid_to,
              deleted_at = excluded.deleted_at, version = excluded.version
        WHERE excluded.version > t.version`,
      [JSON.stringify(changes.locations)],
    );
  }
  if (changes.scanPoints.length) {
    await execute(
      tx,
      `INSERT INTO tracking.scan_points AS t (org_id, id, source, antenna, location_id, valid_from, valid_to, deleted_at, version)
       SELECT x.org_id, x.id, x.source, x.antenna, x.location_id, x.valid_from, x.valid_to, x.deleted_at, x.version
         FROM jsonb_to_recordset($1::jsonb) AS x(org_id int, id int, source text, antenna int, location_id int,
                                                 valid_from timestamptz, valid_to timestamptz, deleted_at timestamptz, version int)
        ORDER BY x.org_id, x.id
       ON CONFLICT (org_id, id) DO UPDATE
          SET source = excluded.source, antenna = excluded.antenna, location_id = excluded.location_id,
              valid_from = excluded.valid_from, valid_to = excluded.valid_to, deleted_at = excluded.deleted_at,
              version = excluded.version
        WHERE excluded.version > t.version`,
      [JSON.stringify(changes.scanPoints)],
    );
  }
  if (changes.assets.length) {
    await execute(
      tx,
      // Arrays (one literal each), not a JSON document: a bulk import's 100,000 assets and tags are
      // parsed about a fifth faster by unnest than by jsonb_to_recordset.
      `INSERT INTO tracking.assets AS t (org_id, id, deleted_at, version)
       SELECT x.org_id, x.id, x.deleted_at, x.version
         FROM unnest($1::int[], $2::int[], $3::timestamptz[], $4::int[]) AS x(org_id, id, deleted_at, version)
        ORDER BY x.org_id, x.id
       ON CONFLICT (org_id, id) DO UPDATE SET deleted_at = excluded.deleted_at, version = excluded.version
        WHERE excluded.version > t.version`,
      unnestColumns(changes.assets, "org_id", "id", "deleted_at", "version"),
    );
  }
  for (const [rows, onConflict] of [
    [
      changes.tags,
      `DO UPDATE SET tag_type = excluded.tag_type, value = excluded.value, owner_type = excluded.owner_type,
                     owner_id = excluded.owner_id, is_active = excluded.is_active, valid_from = excluded.valid_from,
                     valid_to = excluded.valid_to, deleted_at = excluded.deleted_at, version = excluded.version
        WHERE excluded.version > t.version`,
    ],
    // A tag seen only inside its owner's event: never overrides what a tag event said.
    [changes.embeddedTags, "DO NOTHING"],
  ] as const) {
    if (!rows.length) continue;
    await execute(
      tx,
      `INSERT INTO tracking.tags AS t (org_id, id, tag_type, value, owner_type, owner_id, is_active, valid_from, valid_to,
                                       deleted_at, version)
       SELECT x.org_id, x.id, x.tag_type, x.value, x.owner_type, x.owner_id, x.is_active, x.valid_from, x.valid_to,
              x.deleted_at, x.version
         FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::int[], $7::boolean[], $8::timestamptz[],
                     $9::timestamptz[], $10::timestamptz[], $11::int[])
              AS x(org_id, id, tag_type, value, owner_type, owner_id, is_active, valid_from, valid_to, deleted_at, version)
        ORDER BY x.org_id, x.id
       ON CONFLICT (org_id, id) ${onConflict}`,
      unnestColumns(rows, "org_id", "id", "tag_type", "value", "owner_type", "owner_id", "is_active", "valid_from", "valid_to", "deleted_at", "version"),
    );
  }
  const resolving = new Set([...changes.assets, ...changes.tags, ...changes.embeddedTags].map((row) => row.org_id));
  if (resolving.size) {
    // What scan ingestion remembers of these organizations' tags is no longer good (tag-resolver.ts).
    await execute(tx, `UPDATE tracking.orgs SET replica_version = (random() * 9e15)::bigint WHERE id = ANY ($1::int[])`, [[...resolving]]);
  }
  if (changes.streamSeq > 0) await recordOffset(tx, CATALOG_OFFSET, changes.streamSeq);
}

export async function recordOffset(tx: Db, name: string, streamSeq: number): Promise<void> {
  await execute(
    tx,
    `INSERT INTO tracking.stream_offsets AS o (name, stream_seq) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET stream_seq = GREATEST(o.stream_seq, excluded.stream_seq)`,
    [name, streamSeq],
  );
}

export async function readOffset(db: Db, name: string): Promise<number> {
  const rows = await query<{ stream_seq: bigint }>(db, `SELECT stream_seq FROM tracking.stream_offsets WHERE name = $1`, [
    name,
  ]);
  return rows[0] ? Number(rows[0].stream_seq) : 0;
}

/* ------------------------------------------------------------ resolution */

/** The organizations tracking knows, with their replica tokens (tag-resolver.ts) and smoothing windows, at the database's time. */
export interface KnownOrgs {
  versions: Map<number, string>;
  /** `smoothing_window_s` per organization (0: off). */
  windows: Map<number, number>;
  /** The database's clock (epoch ms) when read: resolutions remembered until an instant are checked against it. */
  nowMs: number;
}

export async function knownOrgs(db: Db, orgIds: number[]): Promise<KnownOrgs> {
  if (!orgIds.length) return { versions: new Map(), windows: new Map(), nowMs: 0 };
  const rows = await query<{ id: number; version: string; smoothing_window_s: number; now_ms: number }>(
    db,
    `SELECT id, replica_version::text AS version, smoothing_window_s, (extract(epoch FROM now()) * 1000)::float8 AS now_ms
       FROM tracking.orgs WHERE id = ANY($1::int[])`,
    [orgIds],
  );
  return {
    versions: new Map(rows.map((r) => [r.id, r.version])),
    windows: new Map(rows.map((r) => [r.id, r.smoothing_window_s])),
    nowMs: rows[0]?.now_ms ?? 0,
  };
}

export interface LocationRef {
  orgId: number;
  id?: number;
  externalKey?: string;
  tagType?: string;
  value?: string;
  /** A scan without a location: the scan point of its source and antenna. */
  source?: string;
  antenna?: number | null;
}

/**
 * The live location each reference names (null when none): by id, by
 * external key, or by a live tag attached to it. Answers in input order.
 */
export async function resolveLocations(db: Db, refs: LocationRef[]): Promise<Array<number | null>> {
  if (!refs.length) return [];
  const rows = await query<{ i: bigint; location_id: number | null }>(
    db,
    `SELECT r.i,
            CASE
              WHEN r.loc_id IS NOT NULL THEN
                (SELECT l.id FROM tracking.locations l
                  WHERE l.org_id = r.org_id AND l.id = r.loc_id AND l.deleted_at IS NULL)
              WHEN r.source IS NOT NULL THEN
                (SELECT l.id FROM (
                   -- The antenna's own mapping first, else the source's default (antenna NULL).
                   SELECT s.location_id FROM tracking.scan_points s
                    WHERE s.org_id = r.org_id AND s.source = r.source
                      AND (s.antenna = r.antenna OR s.antenna IS NULL) AND s.deleted_at IS NULL
                      AND ${effectiveSql("s")}
                    ORDER BY s.antenna IS NULL, s.id DESC LIMIT 1) s
                  CROSS JOIN LATERAL (
                   SELECT l.id FROM tracking.locations l
                    WHERE l.org_id = r.org_id AND l.id = s.location_id AND l.deleted_at IS NULL) l)
              WHEN r.external_key IS NOT NULL THEN
                (SELECT l.id FROM tracking.locations l
                  WHERE l.org_id = r.org_id AND l.external_key = r.external_key AND l.deleted_at IS NULL
                  ORDER BY l.id DESC LIMIT 1)
              ELSE
                (SELECT l.id FROM (
                   SELECT t.owner_id FROM tracking.tags t
                    WHERE t.org_id = r.org_id AND t.tag_type = r.tag_type AND t.value = r.tag_value
                      AND t.owner_type = 'location' AND t.deleted_at IS NULL
                    ORDER BY t.id DESC LIMIT 1) t
                  CROSS JOIN LATERAL (
                   SELECT l.id FROM tracking.locations l
                    WHERE l.org_id = r.org_id AND l.id = t.owner_id AND l.deleted_at IS NULL) l)
            END AS location_id
       FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
            WITH ORDINALITY AS r(org_id, loc_id, external_key, tag_type, tag_value, source, antenna, i)`,
    [
      refs.map((r) => r.orgId),
      refs.map((r) => r.id ?? null),
      refs.map((r) => r.externalKey ?? null),
      refs.map((r) => r.tagType ?? null),
      refs.map((r) => r.value ?? null),
      refs.map((r) => r.source ?? null),
      refs.map((r) => r.antenna ?? null),
    ],
  );
  const out: Array<number | null> = new Array(refs.length).fill(null);
  for (const row of rows) out[Number(row.i) - 1] = row.location_id;
  return out;
}

export interface TagRef {
  orgId: number;
  tagType: string;
  value: string;
}

/** What a tag reference resolves to, and until when (epoch ms; null: until the replica changes). */
export interface TagResolution {
  assetId: number | null;
  untilMs: number | null;
}

/**
 * The asset each (tag_type, value) resolves to now (null when none): through
 * the live tag with that pair, attached to a live asset, active and currently
 * effective. A tag attached to a location resolves to nothing. With it, the
 * next instant that answer can change without a catalog event: the chosen
 * tag's expiry, or the start of a candidate tag not yet in effect.
 */
export async function resolveAssetTags(db: Db, refs: TagRef[]): Promise<TagResolution[]> {
  if (!refs.length) return [];
  // The owner's liveness is a scalar subquery per row: always a primary-key
  // probe, whatever the planner believes about the replica's size.
  const rows = await query<{ i: bigint; asset_id: number | null; until_ms: number | null }>(
    db,
    `SELECT r.i,
            CASE WHEN (SELECT a.deleted_at IS NULL FROM tracking.assets a WHERE a.org_id = r.org_id AND a.id = t.owner_id)
                 THEN t.owner_id END AS asset_id,
            (extract(epoch FROM LEAST(t.valid_to, (
               SELECT min(n.valid_from) FROM tracking.tags n
                WHERE n.org_id = r.org_id AND n.tag_type = r.tag_type AND n.value = r.tag_value
                  AND n.owner_type = 'asset' AND n.deleted_at IS NULL AND n.is_active AND n.valid_from > now()
            ))) * 1000)::float8 AS until_ms
       FROM unnest($1::int[], $2::text[], $3::text[]) WITH ORDINALITY AS r(org_id, tag_type, tag_value, i)
       LEFT JOIN LATERAL (
         SELECT t.owner_id, t.valid_to FROM tracking.tags t
          WHERE t.org_id = r.org_id AND t.tag_type = r.tag_type AND t.value = r.tag_value
            AND t.owner_type = 'asset' AND t.deleted_at IS NULL AND t.is_active
            AND ${effectiveSql("t")}
          ORDER BY t.id DESC LIMIT 1
       ) t ON true`,
    unnestColumns(refs, "orgId", "tagType", "value"),
  );
  const out: TagResolution[] = new Array(refs.length);
  for (const row of rows) out[Number(row.i) - 1] = { assetId: row.asset_id, untilMs: row.until_ms };
  return out;
}

/** Live assets among the given ids (history reads are 404 for the others). */
export async function liveAsset(db: Db, orgId: number, assetId: number): Promise<boolean> {
  const rows = await query<{ found: boolean }>(
    db,
    `SELECT EXISTS (SELECT 1 FROM tracking.assets WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL) AS found`,
    [orgId, assetId],
  );
  return rows[0]?.found === true;
}
