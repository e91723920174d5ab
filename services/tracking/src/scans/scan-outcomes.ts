/**
 * Outcomes of handheld submissions (EXTENSIONS.md section 2), for the page's
 * status question "what became of event <id>?". Only scans whose source is
 * `handheld-<user_id>` get a row, written before their message is acked, so
 * a processed submission always has its outcome; the first outcome of an
 * event id wins (a retry or a redelivery changes nothing).
 */
import type { ScanTag } from "@whereabouts/shared";
import { query, type Db } from "../db/tracking-db.ts";

const HANDHELD_SOURCE = /^handheld-\d+$/;

/** Whether a scan subject (`scans.<org_id>.<source>`) is a handheld's. */
export const isHandheldSubject = (subject: string) => HANDHELD_SOURCE.test(subject.slice(subject.lastIndexOf(".") + 1));

/** The event id of an idempotency key (`e:<event_id>`), if it has one. */
export const eventIdOfKey = (key: string) => (key.startsWith("e:") ? key.slice(2) : undefined);

export interface ScanOutcome {
  orgId: number;
  eventId: string;
  status: "processed" | "dead_lettered";
  locationId: number | null;
  assetIds: number[];
  unresolvedTags: ScanTag[];
  reason: string | null;
}

export async function recordOutcomes(db: Db, outcomes: ScanOutcome[]): Promise<void> {
  if (!outcomes.length) return;
  await query(
    db,
    `INSERT INTO tracking.scan_outcomes (org_id, event_id, status, location_id, asset_ids, unresolved_tags, reason)
     SELECT o.org_id, o.event_id, o.status, o.location_id,
            ARRAY(SELECT jsonb_array_elements_text(o.asset_ids)::int), o.unresolved_tags, o.reason
       FROM jsonb_to_recordset($1::jsonb)
         AS o(org_id int, event_id text, status text, location_id int, asset_ids jsonb, unresolved_tags jsonb, reason text)
     ON CONFLICT (org_id, event_id) DO NOTHING`,
    [
      JSON.stringify(
        outcomes.map((o) => ({
          org_id: o.orgId,
          event_id: o.eventId,
          status: o.status,
          location_id: o.locationId,
          asset_ids: o.assetIds,
          unresolved_tags: o.unresolvedTags,
          reason: o.reason,
        })),
      ),
    ],
  );
}

export async function findOutcome(db: Db, orgId: number, eventId: string): Promise<ScanOutcome | undefined> {
  const rows = await query<{ status: ScanOutcome["status"]; location_id: number | null; asset_ids: number[]; unresolved_tags: ScanTag[]; reason: string | null }>(
    db,
    `SELECT status, location_id, asset_ids, unresolved_tags, reason FROM tracking.scan_outcomes WHERE org_id = $1 AND event_id = $2`,
    [orgId, eventId],
  );
  const row = rows[0];
  return row && { orgId, eventId, status: row.status, locationId: row.location_id, assetIds: row.asset_ids, unresolvedTags: row.unresolved_tags, reason: row.reason };
}
