/**
 * `GET /api/v1/events?after=<cursor>&type=...&limit=` (EXTENSIONS.md section 4):
 * an organization's partner events, oldest first. The cursor is opaque to
 * partners; inside it is the feed position (`seq`) of the last event read.
 * Retention removes old events in the background; a cursor from before what
 * it removed is 410 Gone, since events after it are lost to that reader.
 */
import {
  AppError,
  PARTNER_EVENT_TYPES,
  QueryReader,
  type ConsistencyGate,
  type Logger,
  type PartnerEvent,
  type PartnerEventType,
  type RpcRequest,
  type Worker,
  requireOrg,
  startPeriodic,
} from "@whereabouts/shared";
import type { ReportingDb, SqlRunner } from "../reporting-db.ts";

const CURSOR_PREFIX = "e1.";

export function encodeCursor(seq: bigint): string {
  return Buffer.from(`${CURSOR_PREFIX}${seq}`).toString("base64url");
}

/** The feed position in a cursor, or undefined when it is not one of ours. */
export function decodeCursor(cursor: string): bigint | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  if (!text.startsWith(CURSOR_PREFIX)) return undefined;
  const digits = text.slice(CURSOR_PREFIX.length);
  if (!/^\d{1,19}$/.test(digits)) return undefined;
  const seq = BigInt(digits);
  return seq <= 9223372036854775807n ? seq : undefined;
}

export interface FeedQuery {
  after: bigint | undefined;
  types: PartnerEventType[];
  limit: number;
}

export function parseFeedQuery(query: Record<string, string[]>): FeedQuery {
  const reader = new QueryReader(query);
  const rawAfter = reader.one("after");
  let after: bigint | undefined;
  if (rawAfter !== undefined) {
    after = decodeCursor(rawAfter);
    if (after === undefined) reader.fail("after", "invalid_value", "after must be a next_cursor this feed returned");
  }
  const types: PartnerEventType[] = [];
  for (const type of reader.many("type")) {
    if ((PARTNER_EVENT_TYPES as readonly string[]).includes(type)) types.push(type as PartnerEventType);
    else reader.fail("type", "invalid_value", `unknown event type: ${type}`, { allowed_values: PARTNER_EVENT_TYPES });
  }
  const { limit } = reader.page();
  reader.declare("offset");
  if (reader.has("offset")) reader.fail("offset", "unknown_field", "the event feed pages with after, not offset");
  reader.finish();
  return { after, types: [...new Set(types)], limit };
}

interface EventRow {
  seq: bigint;
  id: string;
  type: PartnerEventType;
  occurred_at: string;
  org_id: number;
  data: unknown;
}

export function createEventFeed(deps: { db: ReportingDb; catalog: ConsistencyGate; retentionS: number }) {
  return {
    async list(request: Pick<RpcRequest, "principal" | "query" | "catalog_seq">): Promise<{ data: PartnerEvent[]; next_cursor: string }> {
      const orgId = requireOrg(request.principal);
      const query = parseFeedQuery(request.query);
      // Read-your-writes: a catalog write the client saw acknowledged is in its feed.
      await deps.catalog.reach(request.catalog_seq);
      const purged = await deps.db.$queryRawUnsafe<Array<{ purged_through: bigint }>>(
        `SELECT purged_through FROM reporting.partner_event_purges WHERE org_id = $1`,
        orgId,
      );
      const purgedThrough = purged[0]?.purged_through ?? 0n;
      if (query.after !== undefined && query.after < purgedThrough) {
        throw new AppError(
          "gone",
          `The cursor is older than the event retention window (${retentionText(deps.retentionS)}): events after it have been removed. Read the feed again without after.`,
        );
      }
      const start = query.after ?? 0n;
      const rows = await deps.db.$queryRawUnsafe<EventRow[]>(
        `SELECT seq, id, type, occurred_at, org_id, data
           FROM reporting.partner_events
          WHERE org_id = $1 AND seq > $2 ${query.types.length ? "AND type = ANY ($4::text[])" : ""}
          ORDER BY seq
          LIMIT $3`,
        orgId,
        start,
        query.limit,
        ...(query.types.length ? [query.types] : []),
      );
      const last = rows.at(-1)?.seq ?? (query.after ?? purgedThrough);
      return {
        data: rows.map((r) => ({ id: r.id, type: r.type, occurred_at: r.occurred_at, org_id: r.org_id, data: r.data })),
        next_cursor: encodeCursor(last),
      };
    },
  };
}
export type EventFeed = ReturnType<typeof createEventFeed>;

function retentionText(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400} day${seconds === 86400 ? "" : "s"}`;
  return `${seconds} s`;
}

/**
 * Removes events recorded longer ago than the retention, in batches, and
 * notes per organization how far it went. Events with deliveries still
 * pending wait for them (a retry window is 24 h). The delivery log and
 * finished deliveries older than the retention go too. Returns the number
 * of events removed.
 */
export async function purgeExpiredEvents(db: SqlRunner, retentionS: number, batchSize = 5000): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await db.$queryRawUnsafe<Array<{ removed: number }>>(
      `WITH gone AS (
         DELETE FROM reporting.partner_events e
          WHERE e.seq IN (
            SELECT p.seq FROM reporting.partner_events p
             WHERE p.recorded_at < now() - make_interval(secs => $1)
               AND NOT EXISTS (SELECT 1 FROM reporting.webhook_deliveries d WHERE d.event_seq = p.seq AND d.state = 'pending')
             ORDER BY p.recorded_at
             LIMIT $2)
         RETURNING e.org_id, e.seq
       ), marks AS (
         INSERT INTO reporting.partner_event_purges (org_id, purged_through)
         SELECT org_id, max(seq) FROM gone GROUP BY org_id
         ON CONFLICT (org_id) DO UPDATE SET purged_through = GREATEST(reporting.partner_event_purges.purged_through, EXCLUDED.purged_through)
       )
       SELECT count(*)::int AS removed FROM gone`,
      retentionS,
      batchSize,
    );
    const removed = rows[0]?.removed ?? 0;
    total += removed;
    if (removed < batchSize) break;
  }
  // The delivery log and finished deliveries go with the events: the oldest first (ids follow time).
  for (const [table, expired] of [
    ["webhook_attempts", "attempted_at < now() - make_interval(secs => $1)"],
    ["webhook_deliveries", "state <> 'pending' AND finished_at < now() - make_interval(secs => $1)"],
  ] as const) {
    for (;;) {
      const removed = await db.$executeRawUnsafe(
        `DELETE FROM reporting.${table} WHERE id IN (SELECT id FROM reporting.${table} ORDER BY id LIMIT $2) AND ${expired}`,
        retentionS,
        batchSize,
      );
      if (removed < batchSize) break;
    }
  }
  return total;
}

/** The background purge: every `everyMs` (and once at start). */
export function startEventRetention(deps: { db: SqlRunner; retentionS: number; logger: Logger; everyMs?: number }): Worker {
  return startPeriodic({
    everyMs: deps.everyMs ?? 60_000,
    ref: true,
    round: async () => {
      const removed = await purgeExpiredEvents(deps.db, deps.retentionS);
      if (removed > 0) deps.logger.info({ removed }, "expired partner events removed");
    },
    onError: (err) => deps.logger.warn({ err }, "partner event retention failed; next round retries"),
  });
}
