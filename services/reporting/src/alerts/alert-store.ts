/**
 * Alert state in Postgres: settings, per-asset state with its due times, zone
 * standings, the place facts the rules need, and the partner events alerts
 * become. Every writer of an asset's state first locks its `alert_assets` row,
 * in (org_id, asset_id) order, so the consumers, the worker and the settings
 * and dwell-limit updates never deadlock and never interleave on one asset.
 */
import { epochMicrosSql, unnestColumns, wireFromMicros } from "@whereabouts/shared";
import type { SqlRunner } from "../reporting-db.ts";
import { insertPartnerEvents } from "../events/partner-events.ts";
import type { LocationRow, SettingsRow } from "../projection/projection-types.ts";
import {
  DEFAULT_ALERT_SETTINGS,
  dwellDue,
  missingDue,
  zoneDue,
  type AlertDraft,
  type AlertSettings,
  type AssetAlertState,
  type PlaceFacts,
} from "./alert-rules.ts";

/** A timestamptz column as epoch microseconds (exact in a double). */
const micros = (column: string) => `${epochMicrosSql(column)}::float8`;
/** Epoch microseconds (bigint) as a timestamptz, exactly. */
const instant = (expr: string) => `('epoch'::timestamptz + (${expr}) * interval '1 microsecond')`;
/** Bounds the walk up the tree, so a transient cycle in the replica cannot loop. */
const MAX_DEPTH = 1000;

export interface AssetKey {
  orgId: number;
  assetId: number;
}
const byAsset = (a: AssetKey, b: AssetKey) => a.orgId - b.orgId || a.assetId - b.assetId;

/* ---------------------------------------------------------------- settings */

export async function loadSettings(tx: SqlRunner, orgIds: number[]): Promise<Map<number, AlertSettings>> {
  const rows = await tx.$queryRawUnsafe<Array<{ org_id: number; zone_min_stay_s: number; missing_after_s: number }>>(
    `SELECT org_id, zone_min_stay_s, missing_after_s FROM reporting.org_settings WHERE org_id = ANY ($1::int[])`,
    orgIds,
  );
  const settings = new Map(orgIds.map((id) => [id, DEFAULT_ALERT_SETTINGS]));
  for (const r of rows) settings.set(r.org_id, { zoneMinStayS: r.zone_min_stay_s, missingAfterS: r.missing_after_s });
  return settings;
}

/**
 * Applies settings events (newest version wins) and moves the due times they
 * govern: missing alerts not yet fired, and crossings awaiting confirmation.
 */
export async function applySettings(tx: SqlRunner, rows: SettingsRow[]): Promise<void> {
  if (!rows.length) return;
  const changed = await tx.$queryRawUnsafe<Array<{ org_id: number }>>(
    `INSERT INTO reporting.org_settings AS s (org_id, version, zone_min_stay_s, missing_after_s)
     SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::int[])
     ON CONFLICT (org_id) DO UPDATE
        SET version = EXCLUDED.version, zone_min_stay_s = EXCLUDED.zone_min_stay_s, missing_after_s = EXCLUDED.missing_after_s
      WHERE s.version < EXCLUDED.version
     RETURNING org_id`,
    ...unnestColumns([...rows].sort((a, b) => a.orgId - b.orgId), "orgId", "version", "zoneMinStayS", "missingAfterS"),
  );
  const orgs = changed.map((r) => r.org_id);
  if (!orgs.length) return;
  // Rare (an administrator's change): every state row of the organization, locked in order first.
  await tx.$executeRawUnsafe(
    `WITH target AS (
       SELECT org_id, asset_id FROM reporting.alert_assets WHERE org_id = ANY ($1::int[]) ORDER BY org_id, asset_id FOR UPDATE
     )
     UPDATE reporting.alert_assets a
        SET missing_due_at = CASE WHEN s.missing_after_s > 0 AND NOT a.missing_fired AND a.last_seen_seq >= 0
                                  THEN a.last_seen_at + s.missing_after_s * interval '1 second' END
       FROM target t, reporting.org_settings s
      WHERE a.org_id = t.org_id AND a.asset_id = t.asset_id AND s.org_id = a.org_id`,
    orgs,
  );
  await tx.$executeRawUnsafe(
    `UPDATE reporting.zone_presence p SET due_at = p.crossed_at + s.zone_min_stay_s * interval '1 second'
       FROM reporting.org_settings s
      WHERE p.org_id = ANY ($1::int[]) AND s.org_id = p.org_id AND p.crossed_at IS NOT NULL`,
    orgs,
  );
}

/**
 * A location's dwell limit may have changed: the due times of the assets there
 * (stays whose alert already went out stay fired).
 */
export async function applyDwellLimits(tx: SqlRunner, locations: LocationRow[]): Promise<void> {
  if (!locations.length) return;
  // Only rows whose due time changes are locked (the lock re-checks the condition on the newest row).
  const dueAt = `CASE WHEN l.max_dwell_s IS NOT NULL AND NOT a.dwell_fired THEN a.arrived_at + l.max_dwell_s * interval '1 second' END`;
  await tx.$executeRawUnsafe(
    `WITH target AS (
       SELECT a.org_id, a.asset_id FROM reporting.alert_assets a
         JOIN unnest($1::int[], $2::int[]) AS u(org_id, location_id) ON a.org_id = u.org_id AND a.location_id = u.location_id
         JOIN reporting.locations l ON l.org_id = a.org_id AND l.location_id = a.location_id
        WHERE a.last_seen_seq >= 0 AND a.dwell_due_at IS DISTINCT FROM ${dueAt}
        ORDER BY a.org_id, a.asset_id FOR UPDATE OF a
     )
     UPDATE reporting.alert_assets a SET dwell_due_at = ${dueAt}
       FROM target t, reporting.locations l
      WHERE a.org_id = t.org_id AND a.asset_id = t.asset_id AND l.org_id = a.org_id AND l.location_id = a.location_id`,
    ...unnestColumns(locations, "orgId", "locationId"),
  );
}

/* ------------------------------------------------------ organizations in use */

/**
 * Alert state is kept only for organizations that use alerts (alert_orgs).
 * A batch that may start an organization takes its lock exclusively, a batch
 * of positions shares it; both before writing any row. So the seed (from
 * positions) never misses a position a concurrent batch is writing, and a
 * positions batch after the start sees it and keeps the state.
 */
async function lockOrgs(tx: SqlRunner, orgIds: number[], mode: "shared" | "exclusive"): Promise<void> {
  if (!orgIds.length) return;
  const fn = mode === "shared" ? "pg_advisory_xact_lock_shared" : "pg_advisory_xact_lock";
  await tx.$queryRawUnsafe(
    `SELECT count(${fn}(hashtext('reporting.alert-orgs'), o))::int AS locked FROM (SELECT unnest($1::int[]) AS o ORDER BY 1) s`,
    [...new Set(orgIds)].sort((a, b) => a - b),
  );
}

export async function lockAlertOrgs(tx: SqlRunner, starting: number[], positioned: number[]): Promise<void> {
  await lockOrgs(tx, starting, "exclusive");
  const exclusive = new Set(starting);
  await lockOrgs(tx, positioned.filter((o) => !exclusive.has(o)), "shared");
}

/** Of these organizations, those whose alert state is kept. */
export async function alertOrgs(tx: SqlRunner, orgIds: number[]): Promise<Set<number>> {
  if (!orgIds.length) return new Set();
  const rows = await tx.$queryRawUnsafe<Array<{ org_id: number }>>(
    `SELECT org_id FROM reporting.alert_orgs WHERE org_id = ANY ($1::int[])`,
    orgIds,
  );
  return new Set(rows.map((r) => r.org_id));
}

/**
 * Starts keeping alert state for these organizations (those not yet kept):
 * every live placed asset's state is seeded from its position. Returns the
 * organizations started.
 */
export async function startAlertOrgs(tx: SqlRunner, orgIds: number[]): Promise<number[]> {
  if (!orgIds.length) return [];
  const rows = await tx.$queryRawUnsafe<Array<{ org_id: number }>>(
    `WITH fresh AS (
       INSERT INTO reporting.alert_orgs (org_id) SELECT DISTINCT unnest($1::int[]) ORDER BY 1
       ON CONFLICT (org_id) DO NOTHING
       RETURNING org_id
     ), seeded AS ( -- runs to completion though nothing reads it (a data-modifying WITH)
       INSERT INTO reporting.alert_assets (org_id, asset_id, location_id, arrived_at, last_seen_at, last_seen_seq)
       SELECT p.org_id, p.asset_id, p.location_id, COALESCE(p.arrived_at, p.last_seen_at), p.last_seen_at, p.last_seen_seq
         FROM fresh f
         JOIN reporting.positions p ON p.org_id = f.org_id
         JOIN reporting.assets a ON a.org_id = p.org_id AND a.asset_id = p.asset_id AND a.deleted_at IS NULL
        ORDER BY p.org_id, p.asset_id
       ON CONFLICT (org_id, asset_id) DO NOTHING
     )
     SELECT org_id FROM fresh`,
    orgIds,
  );
  return rows.map((r) => r.org_id);
}

/* ------------------------------------------------------------------ states */

interface StateRow {
  org_id: number;
  asset_id: number;
  location_id: number;
  arrived_at: number;
  last_seen_at: number;
  last_seen_seq: number;
  dwell_fired: boolean;
  missing_fired: boolean;
}

const STATE_COLUMNS = `a.org_id, a.asset_id, a.location_id, ${micros("a.arrived_at")} AS arrived_at,
  ${micros("a.last_seen_at")} AS last_seen_at, a.last_seen_seq::float8 AS last_seen_seq, a.dwell_fired, a.missing_fired`;

async function statesOf(tx: SqlRunner, rows: StateRow[]): Promise<Map<string, AssetAlertState>> {
  const states = new Map<string, AssetAlertState>();
  for (const r of rows) {
    // A placeholder (seq -1) is an asset with no state yet.
    if (r.last_seen_seq < 0) continue;
    states.set(`${r.org_id}:${r.asset_id}`, {
      orgId: r.org_id,
      assetId: r.asset_id,
      locationId: r.location_id,
      arrivedAt: r.arrived_at,
      lastSeenAt: r.last_seen_at,
      lastSeenSeq: r.last_seen_seq,
      dwellFired: r.dwell_fired,
      missingFired: r.missing_fired,
      zones: [],
    });
  }
  if (!rows.length) return states;
  // Standings with a location that is no longer a zone (flag cleared, deleted) are dropped, silently.
  const zones = await tx.$queryRawUnsafe<Array<{ org_id: number; asset_id: number; zone_id: number; inside: boolean; crossed_at: number | null }>>(
    `SELECT p.org_id, p.asset_id, p.zone_id, p.inside, ${micros("p.crossed_at")} AS crossed_at
       FROM reporting.zone_presence p
       JOIN unnest($1::int[], $2::int[]) AS u(org_id, asset_id) ON p.org_id = u.org_id AND p.asset_id = u.asset_id
       JOIN reporting.locations l ON l.org_id = p.org_id AND l.location_id = p.zone_id AND l.is_zone AND l.deleted_at IS NULL
      ORDER BY p.org_id, p.asset_id, p.zone_id`,
    rows.map((r) => r.org_id),
    rows.map((r) => r.asset_id),
  );
  for (const z of zones) {
    states.get(`${z.org_id}:${z.asset_id}`)?.zones.push({ zoneId: z.zone_id, inside: z.inside, crossedAt: z.crossed_at });
  }
  return states;
}

/**
 * Locks the state of these assets (placeholders first for assets without one,
 * so a concurrent first sighting waits rather than overwrites) and loads it.
 */
export async function lockStates(tx: SqlRunner, keys: AssetKey[]): Promise<Map<string, AssetAlertState>> {
  const sorted = [...keys].sort(byAsset);
  const orgs = sorted.map((k) => k.orgId);
  const assets = sorted.map((k) => k.assetId);
  await tx.$executeRawUnsafe(
    `INSERT INTO reporting.alert_assets (org_id, asset_id, location_id, arrived_at, last_seen_at, last_seen_seq)
     SELECT u.org_id, u.asset_id, 0, 'epoch', 'epoch', -1 FROM unnest($1::int[], $2::int[]) AS u(org_id, asset_id)
      ORDER BY u.org_id, u.asset_id
     ON CONFLICT (org_id, asset_id) DO NOTHING`,
    orgs,
    assets,
  );
  const rows = await tx.$queryRawUnsafe<StateRow[]>(
    `SELECT ${STATE_COLUMNS}
       FROM reporting.alert_assets a
       JOIN unnest($1::int[], $2::int[]) AS u(org_id, asset_id) ON a.org_id = u.org_id AND a.asset_id = u.asset_id
      ORDER BY a.org_id, a.asset_id
        FOR UPDATE OF a`,
    orgs,
    assets,
  );
  return statesOf(tx, rows);
}

/** The states with an alert due by the database's clock, locked; rows another replica holds are skipped. */
export async function claimDueStates(
  tx: SqlRunner,
  limit: number,
): Promise<{ now: number; states: Map<string, AssetAlertState>; deleted: Set<string> }> {
  const rows = await tx.$queryRawUnsafe<Array<StateRow & { now: number; deleted: boolean }>>(
    `WITH due AS (
       (SELECT org_id, asset_id FROM reporting.alert_assets WHERE dwell_due_at <= now() ORDER BY dwell_due_at LIMIT $1)
       UNION
       (SELECT org_id, asset_id FROM reporting.alert_assets WHERE missing_due_at <= now() ORDER BY missing_due_at LIMIT $1)
       UNION
       (SELECT org_id, asset_id FROM reporting.zone_presence WHERE due_at <= now() ORDER BY due_at LIMIT $1)
     )
     SELECT ${STATE_COLUMNS}, ${micros("now()")} AS now,
            EXISTS (SELECT 1 FROM reporting.assets x
                     WHERE x.org_id = a.org_id AND x.asset_id = a.asset_id AND x.deleted_at IS NOT NULL) AS deleted
       FROM reporting.alert_assets a JOIN due d ON a.org_id = d.org_id AND a.asset_id = d.asset_id
      ORDER BY a.org_id, a.asset_id
        FOR UPDATE OF a SKIP LOCKED`,
    limit,
  );
  const deleted = new Set(rows.filter((r) => r.deleted).map((r) => `${r.org_id}:${r.asset_id}`));
  return { now: rows[0]?.now ?? 0, states: await statesOf(tx, rows), deleted };
}

/** For each (organization, location): the live zones it lies in (itself included) and its own dwell limit. */
export async function loadPlaces(tx: SqlRunner, places: Array<{ orgId: number; locationId: number }>): Promise<Map<string, PlaceFacts>> {
  const facts = new Map<string, PlaceFacts>();
  if (!places.length) return facts;
  const rows = await tx.$queryRawUnsafe<Array<{ org_id: number; origin: number; zones: number[] | null; max_dwell_s: number | null }>>(
    `WITH RECURSIVE up(org_id, origin, id, parent_id, zone, max_dwell_s, depth) AS (
       SELECT l.org_id, l.location_id, l.location_id, l.parent_id, l.is_zone AND l.deleted_at IS NULL, l.max_dwell_s, 0
         FROM (SELECT DISTINCT * FROM unnest($1::int[], $2::int[])) AS u(org_id, location_id)
         JOIN reporting.locations l ON l.org_id = u.org_id AND l.location_id = u.location_id
       UNION ALL
       SELECT up.org_id, up.origin, l.location_id, l.parent_id, l.is_zone AND l.deleted_at IS NULL, NULL::int, up.depth + 1
         FROM up JOIN reporting.locations l ON l.org_id = up.org_id AND l.location_id = up.parent_id
        WHERE up.depth < ${MAX_DEPTH})
     SELECT org_id, origin, array_agg(DISTINCT id) FILTER (WHERE zone) AS zones, max(max_dwell_s) AS max_dwell_s
       FROM up GROUP BY org_id, origin`,
    places.map((p) => p.orgId),
    places.map((p) => p.locationId),
  );
  for (const r of rows) facts.set(`${r.org_id}:${r.origin}`, { zones: r.zones ?? [], maxDwellS: r.max_dwell_s });
  return facts;
}

/** Writes the states back with their due times (the rows are locked by lockStates / claimDueStates). */
export async function saveStates(
  tx: SqlRunner,
  states: AssetAlertState[],
  places: Map<string, PlaceFacts>,
  settings: Map<number, AlertSettings>,
): Promise<void> {
  if (!states.length) return;
  const sorted = [...states].sort(byAsset);
  const rows = sorted.map((s) => {
    const orgSettings = settings.get(s.orgId) ?? DEFAULT_ALERT_SETTINGS;
    return {
      ...s,
      dwellDue: dwellDue(s, places.get(`${s.orgId}:${s.locationId}`)),
      missingDue: missingDue(s, orgSettings),
    };
  });
  await tx.$executeRawUnsafe(
    `UPDATE reporting.alert_assets a
        SET location_id = u.location_id, arrived_at = ${instant("u.arrived_at")}, last_seen_at = ${instant("u.last_seen_at")},
            last_seen_seq = u.last_seen_seq, dwell_due_at = ${instant("u.dwell_due")}, dwell_fired = u.dwell_fired,
            missing_due_at = ${instant("u.missing_due")}, missing_fired = u.missing_fired
       FROM unnest($1::int[], $2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bool[], $9::bigint[], $10::bool[])
            AS u(org_id, asset_id, location_id, arrived_at, last_seen_at, last_seen_seq, dwell_due, dwell_fired, missing_due, missing_fired)
      WHERE a.org_id = u.org_id AND a.asset_id = u.asset_id`,
    ...unnestColumns(rows, "orgId", "assetId", "locationId", "arrivedAt", "lastSeenAt", "lastSeenSeq", "dwellDue", "dwellFired", "missingDue", "missingFired"),
  );
  await tx.$executeRawUnsafe(
    `DELETE FROM reporting.zone_presence p USING unnest($1::int[], $2::int[]) AS u(org_id, asset_id)
      WHERE p.org_id = u.org_id AND p.asset_id = u.asset_id`,
    rows.map((r) => r.orgId),
    rows.map((r) => r.assetId),
  );
  const zones = sorted.flatMap((s) =>
    s.zones.map((z) => ({
      orgId: s.orgId,
      assetId: s.assetId,
      zoneId: z.zoneId,
      inside: z.inside,
      crossedAt: z.crossedAt,
      dueAt: zoneDue(z, settings.get(s.orgId) ?? DEFAULT_ALERT_SETTINGS),
    })),
  );
  if (zones.length) {
    await tx.$executeRawUnsafe(
      `INSERT INTO reporting.zone_presence (org_id, asset_id, zone_id, inside, crossed_at, due_at)
       SELECT u.org_id, u.asset_id, u.zone_id, u.inside, ${instant("u.crossed_at")}, ${instant("u.due_at")}
         FROM unnest($1::int[], $2::int[], $3::int[], $4::bool[], $5::bigint[], $6::bigint[])
              AS u(org_id, asset_id, zone_id, inside, crossed_at, due_at)`,
      ...unnestColumns(zones, "orgId", "assetId", "zoneId", "inside", "crossedAt", "dueAt"),
    );
  }
}

/* ------------------------------------------------------------------ events */

/**
 * The source id of an alert: one per episode (the crossing, the stay, the
 * sighting it follows), so an alert recorded twice (a redelivered batch, two
 * replicas) is one event.
 */
export const alertSourceId = (d: AlertDraft) => `alert:${d.type}:${d.assetId}:${d.subjectId ?? 0}:${d.type === "zone.entered" || d.type === "zone.exited" ? d.at : d.since}`;

/**
 * Records alerts as partner events (ordered per asset like its other events),
 * with their keys from the read model. Returns how many deliveries it queued.
 */
export async function recordAlerts(tx: SqlRunner, drafts: AlertDraft[]): Promise<number> {
  if (!drafts.length) return 0;
  return insertPartnerEvents(
    tx,
    drafts.length,
    `SELECT e.id, e.org_id, e.type, e.at, e.at::timestamptz, 'asset:' || e.asset_id, e.source_id,
              CASE
                WHEN e.type IN ('zone.entered', 'zone.exited') THEN json_build_object(
                  'asset_id', e.asset_id, 'asset_external_key', a.external_key,
                  'zone_id', e.subject_id, 'zone_external_key', l.external_key, 'observed_at', e.at)
                WHEN e.type = 'asset.dwell_exceeded' THEN json_build_object(
                  'asset_id', e.asset_id, 'asset_external_key', a.external_key,
                  'location_id', e.subject_id, 'location_external_key', l.external_key,
                  'since', e.since, 'max_dwell_s', e.limit_s)
                ELSE json_build_object(
                  'asset_id', e.asset_id, 'asset_external_key', a.external_key,
                  'last_seen_at', e.since, 'last_location_id', e.subject_id, 'missing_after_s', e.limit_s)
              END
         FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::text[], $7::text[], $8::int[], $9::text[])
              WITH ORDINALITY AS e(id, org_id, type, asset_id, subject_id, at, since, limit_s, source_id, ord)
         LEFT JOIN reporting.assets a ON a.org_id = e.org_id AND a.asset_id = e.asset_id
         LEFT JOIN reporting.locations l ON l.org_id = e.org_id AND l.location_id = e.subject_id
        ORDER BY e.ord`,
    [
      ...unnestColumns(drafts, "orgId", "type", "assetId", "subjectId"),
      drafts.map((d) => wireFromMicros(d.at)),
      drafts.map((d) => (d.since === null ? null : wireFromMicros(d.since))),
      drafts.map((d) => d.limitS),
      drafts.map(alertSourceId),
    ],
  );
}
