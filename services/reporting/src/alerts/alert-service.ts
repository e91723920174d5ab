/**
 * Zones and alerts (EXTENSIONS.md section 5), in reporting: it already
 * consumes CATALOG and TRACKING in order and writes the partner feed.
 *
 * - In each consumer batch's transaction: settings and dwell limits move the
 *   due times they govern; every position event is judged (alert-rules.ts)
 *   against the asset's locked state, and what fires is recorded as partner
 *   events with their webhook deliveries.
 * - A worker polls only due rows (partial indexes on the due times), locks them
 *   `FOR UPDATE SKIP LOCKED` so replicas share the work without firing twice,
 *   and fires what the clock (the database's) says is due.
 *
 * State is in Postgres, so a restart loses nothing: due times that passed while
 * no replica ran fire when one comes back. Each alert's source id names its
 * episode, so recording it twice adds one event.
 */
import { epochMicros, startPeriodic, type Logger, type Metrics, type Worker } from "@whereabouts/shared";
import type { ProjectionBatch } from "../projection/projection-service.ts";
import type { ReportingDb, SqlRunner } from "../reporting-db.ts";
import { applyPosition, fireDue, orderDrafts, type AlertDraft, type AlertSettings, type AssetAlertState, type PlaceFacts } from "./alert-rules.ts";
import {
  alertOrgs,
  applyDwellLimits,
  applySettings,
  claimDueStates,
  loadPlaces,
  loadSettings,
  lockAlertOrgs,
  lockStates,
  recordAlerts,
  saveStates,
  startAlertOrgs,
} from "./alert-store.ts";

const keyOf = (orgId: number, id: number) => `${orgId}:${id}`;

/** The places and settings the rules need for these states (and these events' locations). */
async function contextOf(
  tx: SqlRunner,
  states: Iterable<AssetAlertState>,
  extra: Array<{ orgId: number; locationId: number }> = [],
): Promise<{ places: Map<string, PlaceFacts>; settings: Map<number, AlertSettings> }> {
  const wanted = [...extra];
  const orgs = new Set(extra.map((p) => p.orgId));
  for (const s of states) {
    wanted.push({ orgId: s.orgId, locationId: s.locationId });
    orgs.add(s.orgId);
  }
  return { places: await loadPlaces(tx, wanted), settings: await loadSettings(tx, [...orgs]) };
}

async function record(tx: SqlRunner, drafts: AlertDraft[], metrics?: Metrics): Promise<number> {
  if (!drafts.length) return 0;
  const queued = await recordAlerts(tx, orderDrafts(drafts));
  for (const d of drafts) metrics?.alertsFired.inc({ type: d.type });
  return queued;
}

type AlertBatch = Pick<ProjectionBatch, "settings" | "locationRows" | "positionEvents">;

/** Organizations this batch shows using alerts (which may start keeping their state). */
function startingOrgs(batch: AlertBatch): number[] {
  const orgs = new Set<number>();
  for (const s of batch.settings.values()) if (s.missingAfterS > 0) orgs.add(s.orgId);
  for (const l of batch.locationRows) if ((l.isZone || l.maxDwellS !== null) && l.deletedAt === null) orgs.add(l.orgId);
  return [...orgs];
}

/** First thing in a consumer batch's transaction (alert-store.ts lockAlertOrgs says why). */
export async function lockAlertBatch(tx: SqlRunner, batch: AlertBatch): Promise<void> {
  await lockAlertOrgs(tx, startingOrgs(batch), [...new Set(batch.positionEvents.map((e) => e.org_id))]);
}

/**
 * The alert side of one consumer batch, with `tx` (the projection's
 * transaction, after the read model is written, and after lockAlertBatch).
 * Only organizations that use alerts keep state; an organization starts when
 * a batch first shows it using one. Returns deliveries queued.
 */
export async function applyAlerts(tx: SqlRunner, batch: AlertBatch, metrics?: Metrics): Promise<number> {
  await startAlertOrgs(tx, startingOrgs(batch));
  await applySettings(tx, [...batch.settings.values()]);
  await applyDwellLimits(tx, batch.locationRows);
  if (!batch.positionEvents.length) return 0;
  const kept = await alertOrgs(tx, [...new Set(batch.positionEvents.map((e) => e.org_id))]);
  const positionEvents = batch.positionEvents.filter((e) => kept.has(e.org_id));
  if (!positionEvents.length) return 0;

  // Each asset's events in (observed_at, seq) order: the order the rules judge them in.
  const byAsset = new Map<string, Array<{ orgId: number; assetId: number; locationId: number; observedAt: number; seq: number }>>();
  for (const e of positionEvents) {
    const key = keyOf(e.org_id, e.asset_id);
    const list = byAsset.get(key) ?? [];
    list.push({ orgId: e.org_id, assetId: e.asset_id, locationId: e.location_id, observedAt: epochMicros(e.observed_at), seq: e.seq });
    byAsset.set(key, list);
  }
  const keys = [...byAsset.values()].map((list) => ({ orgId: list[0]!.orgId, assetId: list[0]!.assetId }));
  const held = await lockStates(tx, keys);
  const { places, settings } = await contextOf(
    tx,
    held.values(),
    positionEvents.map((e) => ({ orgId: e.org_id, locationId: e.location_id })),
  );
  const drafts: AlertDraft[] = [];
  const states: AssetAlertState[] = [];
  for (const [key, events] of byAsset) {
    events.sort((a, b) => a.observedAt - b.observedAt || a.seq - b.seq);
    let state = held.get(key);
    for (const e of events) {
      const orgSettings = settings.get(e.orgId)!;
      state = applyPosition(state, e, e, (id) => places.get(keyOf(e.orgId, id)), orgSettings, drafts);
    }
    states.push(state!);
  }
  await saveStates(tx, states, places, settings);
  return record(tx, drafts, metrics);
}

/** Fires what is due now, up to `limit` assets; returns how many assets it judged and the deliveries queued. */
export async function fireDueAlerts(db: ReportingDb, limit: number, metrics?: Metrics): Promise<{ claimed: number; queued: number }> {
  return db.$transaction(async (tx) => {
    const { now, states, deleted } = await claimDueStates(tx, limit);
    if (!states.size) return { claimed: 0, queued: 0 };
    const { places, settings } = await contextOf(tx, states.values());
    const drafts: AlertDraft[] = [];
    for (const [key, state] of states) {
      if (deleted.has(key)) {
        // A deleted asset raises nothing more: its pending alerts end quietly.
        state.dwellFired = true;
        state.missingFired = true;
        state.zones = [];
        continue;
      }
      fireDue(state, now, places.get(keyOf(state.orgId, state.locationId)), settings.get(state.orgId)!, drafts);
    }
    await saveStates(tx, [...states.values()], places, settings);
    return { claimed: states.size, queued: await record(tx, drafts, metrics) };
  });
}

export interface AlertWorkerOptions {
  db: ReportingDb;
  logger: Logger;
  metrics?: Metrics;
  /** How often due rows are looked for (default 500 ms): one indexed probe per due-time index. */
  pollMs?: number;
  /** Assets judged per transaction. */
  batch?: number;
  /** Hears of new webhook deliveries after the commit. */
  queued?: (deliveries: number) => void;
}

/** The due-time poller; every replica runs one. */
export function startAlertWorker(options: AlertWorkerOptions): Worker {
  const { db, logger, metrics } = options;
  const pollMs = options.pollMs ?? 500;
  const limit = options.batch ?? 500;
  return startPeriodic({
    everyMs: pollMs,
    firstAfterMs: pollMs,
    ref: true,
    round: async (stopping) => {
      for (;;) {
        const { claimed, queued } = await fireDueAlerts(db, limit, metrics);
        if (queued > 0) options.queued?.(queued);
        if (claimed < limit || stopping()) break;
      }
    },
    // The rows stay due: the next round tries again.
    onError: (err) => logger.error({ err }, "alerts: firing due alerts failed"),
  });
}
