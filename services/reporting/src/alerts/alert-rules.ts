/**
 * The alert rules (EXTENSIONS.md section 5), pure: an asset's alert state, the
 * position events that reach it in order, and what fires. Times are epoch
 * microseconds (exact in a double until the year 2255).
 *
 * - Zones: each zone (a location with is_zone, counting its subtree) is judged
 *   on its own. A crossing of its boundary is confirmed once the asset has
 *   stayed on the new side for zone_min_stay_s: either a later scan on that
 *   side observed at least that long after the crossing, or the due time
 *   passing with no scan that says otherwise (the worker). A scan back on the
 *   old side before then cancels it: no event. The event's time is the
 *   crossing: the observed_at of the first scan on the new side.
 * - Dwell: at the location itself (a move to a child ends the stay), from the
 *   first scan there; fires at arrival + max_dwell_s, once per stay.
 * - Missing: fires at last seen + missing_after_s, once until seen again.
 *
 * A due time already passed in the data (a scan observed after it) fires when
 * that scan is applied, so the outcome does not depend on when the worker ran.
 */
import { isNewer } from "@whereabouts/shared";

export type AlertType = "zone.entered" | "zone.exited" | "asset.dwell_exceeded" | "asset.missing";

export interface AlertSettings {
  zoneMinStayS: number;
  missingAfterS: number;
}

export const DEFAULT_ALERT_SETTINGS: AlertSettings = { zoneMinStayS: 60, missingAfterS: 0 };

export interface ZoneStanding {
  zoneId: number;
  /** As last announced. */
  inside: boolean;
  /** A crossing awaiting confirmation, or null. */
  crossedAt: number | null;
}

export interface AssetAlertState {
  orgId: number;
  assetId: number;
  locationId: number;
  arrivedAt: number;
  lastSeenAt: number;
  lastSeenSeq: number;
  dwellFired: boolean;
  missingFired: boolean;
  zones: ZoneStanding[];
}

/** What the rules know of a location: the zones it lies in (itself included) and its dwell limit. */
export interface PlaceFacts {
  zones: number[];
  maxDwellS: number | null;
}

export interface PositionInput {
  locationId: number;
  observedAt: number;
  seq: number;
}

/** An alert to record: `at` is its occurred_at; `subjectId` the zone or location. */
export interface AlertDraft {
  type: AlertType;
  orgId: number;
  assetId: number;
  at: number;
  subjectId: number | null;
  /** dwell: the arrival; missing: the last sighting. */
  since: number | null;
  limitS: number | null;
}

const S = 1_000_000;

/** When the dwell alert of the current stay falls due (null: no limit there, or it fired). */
export function dwellDue(state: AssetAlertState, place: PlaceFacts | undefined): number | null {
  if (state.dwellFired || !place || place.maxDwellS === null) return null;
  return state.arrivedAt + place.maxDwellS * S;
}

export function missingDue(state: AssetAlertState, settings: AlertSettings): number | null {
  if (state.missingFired || settings.missingAfterS <= 0) return null;
  return state.lastSeenAt + settings.missingAfterS * S;
}

export function zoneDue(zone: ZoneStanding, settings: AlertSettings): number | null {
  return zone.crossedAt === null ? null : zone.crossedAt + settings.zoneMinStayS * S;
}

/** Confirms a pending crossing: the announcement, and the standing after it. */
export function confirmCrossing(state: Pick<AssetAlertState, "orgId" | "assetId">, zone: ZoneStanding): AlertDraft {
  const draft: AlertDraft = {
    type: zone.inside ? "zone.exited" : "zone.entered",
    orgId: state.orgId,
    assetId: state.assetId,
    at: zone.crossedAt!,
    subjectId: zone.zoneId,
    since: null,
    limitS: null,
  };
  zone.inside = !zone.inside;
  zone.crossedAt = null;
  return draft;
}

/** Fires whatever fell due at or before `now` (data time or wall time). */
export function fireDue(
  state: AssetAlertState,
  now: number,
  place: PlaceFacts | undefined,
  settings: AlertSettings,
  out: AlertDraft[],
): void {
  for (const zone of state.zones) {
    const due = zoneDue(zone, settings);
    if (due !== null && due <= now) out.push(confirmCrossing(state, zone));
  }
  const dwell = dwellDue(state, place);
  if (dwell !== null && dwell <= now) {
    out.push({
      type: "asset.dwell_exceeded",
      orgId: state.orgId,
      assetId: state.assetId,
      at: dwell,
      subjectId: state.locationId,
      since: state.arrivedAt,
      limitS: place!.maxDwellS,
    });
    state.dwellFired = true;
  }
  const missing = missingDue(state, settings);
  if (missing !== null && missing <= now) {
    out.push({
      type: "asset.missing",
      orgId: state.orgId,
      assetId: state.assetId,
      at: missing,
      subjectId: state.locationId,
      since: state.lastSeenAt,
      limitS: settings.missingAfterS,
    });
    state.missingFired = true;
  }
  // A standing that is neither inside nor pending is no standing at all.
  state.zones = state.zones.filter((z) => z.inside || z.crossedAt !== null);
}

/**
 * Applies one position to the asset's state (undefined: its first), returning
 * the new state; drafts go to `out`. A position not newer than the state's
 * (observed_at, seq) changes nothing: a late scan never moves an asset.
 */
export function applyPosition(
  held: AssetAlertState | undefined,
  ids: { orgId: number; assetId: number },
  position: PositionInput,
  places: (locationId: number) => PlaceFacts | undefined,
  settings: AlertSettings,
  out: AlertDraft[],
): AssetAlertState {
  if (held && !isNewer({ at: held.lastSeenAt, seq: held.lastSeenSeq }, { at: position.observedAt, seq: position.seq })) {
    return held;
  }
  let state: AssetAlertState;
  if (!held) {
    state = {
      ...ids,
      locationId: position.locationId,
      arrivedAt: position.observedAt,
      lastSeenAt: position.observedAt,
      lastSeenSeq: position.seq,
      dwellFired: false,
      missingFired: false,
      zones: [],
    };
  } else {
    state = held;
    // What the data already proves before this scan: due times it passed.
    fireDue(state, position.observedAt, places(state.locationId), settings, out);
    if (position.locationId !== state.locationId) {
      state.locationId = position.locationId;
      state.arrivedAt = position.observedAt;
      state.dwellFired = false;
    }
    state.lastSeenAt = position.observedAt;
    state.lastSeenSeq = position.seq;
    state.missingFired = false; // seen again: a new episode
  }

  const place = places(position.locationId);
  const insideNow = new Set(place?.zones ?? []);
  const standings = new Map(state.zones.map((z) => [z.zoneId, z]));
  for (const zoneId of insideNow) if (!standings.has(zoneId)) standings.set(zoneId, { zoneId, inside: false, crossedAt: null });
  for (const zone of standings.values()) {
    const inside = insideNow.has(zone.zoneId);
    if (inside === zone.inside) zone.crossedAt = null; // back before the stay was long enough: no event
    else if (zone.crossedAt === null) zone.crossedAt = position.observedAt;
  }
  state.zones = [...standings.values()];
  // zone_min_stay_s of 0 (and any other due time reached by this very scan).
  fireDue(state, position.observedAt, place, settings, out);
  return state;
}

/** Drafts in the order partners should read them: by time, exits before entries at the same instant. */
export function orderDrafts(drafts: AlertDraft[]): AlertDraft[] {
  const rank: Record<AlertType, number> = { "zone.exited": 0, "zone.entered": 1, "asset.dwell_exceeded": 2, "asset.missing": 3 };
  return [...drafts].sort((a, b) => a.at - b.at || a.orgId - b.orgId || a.assetId - b.assetId || rank[a.type] - rank[b.type]);
}
