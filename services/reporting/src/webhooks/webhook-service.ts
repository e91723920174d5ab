/**
 * Webhook subscriptions (EXTENSIONS.md section 4): CRUD under
 * `/api/v1/webhooks`, the delivery log and replay. The secret is shown once
 * (on create and on `rotate_secret`); a rotated-out secret keeps signing for
 * 24 h. Every query is scoped to the caller's organization.
 */
import {
  fieldError,
  notFound,
  parseBody,
  parsePathId,
  QueryReader,
  toWireTimestamp,
  toWireTimestampOrNull,
  ValidationError,
  WEBHOOK_SECRET_OVERLAP_MS,
  WebhookCreateRequest,
  WebhookPatchRequest,
  type ListEnvelope,
  type PartnerEventType,
  type RpcRequest,
  type WebhookDeliveryView,
  type WebhookView,
  epochMicros,
  listEnvelope,
  parseInstant,
  requireOrg,
  rfc3339Message,
} from "@whereabouts/shared";
import type { ReportingDb } from "../reporting-db.ts";
import { newWebhookSecret } from "./signature.ts";
import { TargetRefusedError, type TargetGuard } from "./target-guard.ts";

interface WebhookRow {
  id: number;
  url: string;
  types: PartnerEventType[];
  description: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = "id, url, types, description, created_at, updated_at";

const view = (row: WebhookRow): WebhookView => ({
  id: row.id,
  url: row.url,
  types: row.types,
  description: row.description,
  created_at: toWireTimestamp(row.created_at),
  updated_at: toWireTimestamp(row.updated_at),
});

type Request = Pick<RpcRequest, "principal" | "query" | "params" | "body">;

const orgOf = (request: Request): number => requireOrg(request.principal);

const webhookId = (request: Request) => parsePathId("webhook_id", request.params.webhook_id);
const gone = () => notFound("Webhook not found");

/**
 * A page and its total_count from one statement, so from one snapshot: run
 * side by side, an attempt recorded between the two showed in the count and
 * not on the page (a log of two attempts listing one). `page` selects `id`;
 * `order` is its ORDER BY on `id`. An empty page still brings the count.
 */
async function pageAndCount<Row>(
  db: ReportingDb,
  page: string,
  count: string,
  order: string,
  args: unknown[],
): Promise<{ rows: Row[]; total: number }> {
  const found = await db.$queryRawUnsafe<Array<Row & { id: number | bigint | null; total_count: number }>>(
    `SELECT (${count})::int AS total_count, p.* FROM (VALUES (1)) AS one (x) LEFT JOIN (${page}) p ON true ORDER BY p.${order}`,
    ...args,
  );
  return { rows: found.filter((r) => r.id !== null), total: found[0]?.total_count ?? 0 };
}

export interface WebhookServiceDeps {
  db: ReportingDb;
  guard: TargetGuard;
  /** A replay queued deliveries: wake the dispatcher. */
  queued?: (deliveries: number) => void;
}

export function createWebhookService(deps: WebhookServiceDeps) {
  const { db } = deps;

  async function checkTarget(url: string): Promise<void> {
    try {
      await deps.guard.check(url);
    } catch (err) {
      if (!(err instanceof TargetRefusedError)) throw err;
      throw new ValidationError([
        fieldError("url", "invalid_value", `url is not allowed as a webhook target: ${err.message}`),
      ]);
    }
  }

  async function find(orgId: number, id: number): Promise<WebhookRow> {
    const rows = await db.$queryRawUnsafe<WebhookRow[]>(
      `SELECT ${COLUMNS} FROM reporting.webhooks WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL`,
      orgId,
      id,
    );
    if (!rows[0]) throw gone();
    return rows[0];
  }

  return {
    async create(request: Request): Promise<WebhookView & { secret: string }> {
      const orgId = orgOf(request);
      const body = parseBody(WebhookCreateRequest, request.body);
      await checkTarget(body.url);
      const secret = newWebhookSecret();
      const rows = await db.$queryRawUnsafe<WebhookRow[]>(
        `INSERT INTO reporting.webhooks (org_id, url, types, description, secret)
         VALUES ($1, $2, $3::text[], $4, $5) RETURNING ${COLUMNS}`,
        orgId,
        body.url,
        body.types,
        body.description ?? null,
        secret,
      );
      return { ...view(rows[0]!), secret };
    },

    async list(request: Request): Promise<ListEnvelope<WebhookView>> {
      const orgId = orgOf(request);
      const reader = new QueryReader(request.query);
      const { limit, offset } = reader.page();
      reader.finish();
      const { rows, total } = await pageAndCount<WebhookRow>(
        db,
        `SELECT ${COLUMNS} FROM reporting.webhooks WHERE org_id = $1 AND deleted_at IS NULL ORDER BY id LIMIT $2 OFFSET $3`,
        `SELECT count(*) FROM reporting.webhooks WHERE org_id = $1 AND deleted_at IS NULL`,
        "id",
        [orgId, limit, offset],
      );
      return listEnvelope(rows.map(view), { limit, offset }, total);
    },

    async get(request: Request): Promise<WebhookView> {
      const orgId = orgOf(request);
      const id = webhookId(request);
      new QueryReader(request.query).finish();
      return view(await find(orgId, id));
    },

    async update(request: Request): Promise<WebhookView & { secret?: string }> {
      const orgId = orgOf(request);
      const id = webhookId(request);
      const body = parseBody(WebhookPatchRequest, request.body);
      if (body.url !== undefined) await checkTarget(body.url);
      const secret = body.rotate_secret ? newWebhookSecret() : null;
      const rows = await db.$queryRawUnsafe<WebhookRow[]>(
        `UPDATE reporting.webhooks SET
            url = COALESCE($3, url),
            types = COALESCE($4::text[], types),
            description = CASE WHEN $5 THEN $6 ELSE description END,
            previous_secret = CASE WHEN $7::text IS NULL THEN previous_secret ELSE secret END,
            previous_secret_until = CASE WHEN $7::text IS NULL THEN previous_secret_until ELSE now() + make_interval(secs => $8) END,
            secret = COALESCE($7::text, secret),
            updated_at = CASE WHEN $3::text IS NULL AND $4::text[] IS NULL AND NOT $5 AND $7::text IS NULL THEN updated_at ELSE now() END
          WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL
          RETURNING ${COLUMNS}`,
        orgId,
        id,
        body.url ?? null,
        body.types ?? null,
        body.description !== undefined,
        body.description ?? null,
        secret,
        WEBHOOK_SECRET_OVERLAP_MS / 1000,
      );
      if (!rows[0]) throw gone();
      return secret ? { ...view(rows[0]), secret } : view(rows[0]);
    },

    async delete(request: Request): Promise<void> {
      const orgId = orgOf(request);
      const id = webhookId(request);
      await db.$transaction(async (tx) => {
        const rows = await tx.$queryRawUnsafe<unknown[]>(
          `UPDATE reporting.webhooks SET deleted_at = now(), updated_at = now()
            WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING id`,
          orgId,
          id,
        );
        if (!rows.length) throw gone();
        // Nothing more goes out to a deleted webhook.
        await tx.$executeRawUnsafe(`DELETE FROM reporting.webhook_deliveries WHERE webhook_id = $1 AND state = 'pending'`, id);
      });
    },

    /** One row per attempt, newest first; `state` and `event_id` filter. */
    async deliveries(request: Request): Promise<ListEnvelope<WebhookDeliveryView>> {
      const orgId = orgOf(request);
      const id = webhookId(request);
      const reader = new QueryReader(request.query);
      const states = reader.many("state");
      for (const state of states) {
        if (!["pending", "delivered", "failed"].includes(state)) {
          reader.fail("state", "invalid_value", `unknown state: ${state}`, { allowed_values: ["pending", "delivered", "failed"] });
        }
      }
      const eventIds = reader.many("event_id");
      const { limit, offset } = reader.page();
      reader.finish();
      await find(orgId, id);
      const where = `org_id = $1 AND webhook_id = $2
        ${states.length ? "AND state = ANY ($3::text[])" : "AND $3::text[] IS NULL"}
        ${eventIds.length ? "AND event_id = ANY ($4::text[])" : "AND $4::text[] IS NULL"}`;
      const args = [orgId, id, states.length ? states : null, eventIds.length ? eventIds : null];
      const { rows, total } = await pageAndCount<{
        event_id: string;
        event_type: PartnerEventType;
        attempt: number;
        status_code: number | null;
        duration_ms: number | null;
        attempted_at: Date;
        next_attempt_at: Date | null;
        state: WebhookDeliveryView["state"];
        error: string | null;
      }>(
        db,
        `SELECT id, event_id, event_type, attempt, status_code, duration_ms, attempted_at, next_attempt_at, state, error
           FROM reporting.webhook_attempts WHERE ${where} ORDER BY id DESC LIMIT $5 OFFSET $6`,
        `SELECT count(*) FROM reporting.webhook_attempts WHERE ${where}`,
        "id DESC",
        [...args, limit, offset],
      );
      return listEnvelope(
        rows.map((r) => ({
          event_id: r.event_id,
          event_type: r.event_type,
          attempt: r.attempt,
          status_code: r.status_code,
          duration_ms: r.duration_ms,
          attempted_at: toWireTimestamp(r.attempted_at),
          next_attempt_at: toWireTimestampOrNull(r.next_attempt_at),
          state: r.state,
          error: r.error,
        })),
        { limit, offset },
        total,
      );
    },

    /** `POST .../replay?from=<time>[&to=<time>]`: the window's events (of the webhook's types) go out again, in order. */
    async replay(request: Request): Promise<{ webhook_id: number; from: string; to: string | null; events: number }> {
      const orgId = orgOf(request);
      const id = webhookId(request);
      const reader = new QueryReader(request.query);
      const from = instant(reader, "from", true);
      const to = instant(reader, "to", false);
      reader.finish();
      if (request.body !== undefined && (request.body === null || typeof request.body !== "object" || Object.keys(request.body).length)) {
        throw new ValidationError([fieldError("body", "invalid_value", "replay takes its window in the query (from, to); send no body or {}")]);
      }
      if (from && to && epochMicros(to) <= epochMicros(from)) {
        throw new ValidationError([fieldError("to", "invalid_value", "to must be after from")]);
      }
      await find(orgId, id);
      const rows = await db.$queryRawUnsafe<unknown[]>(
        `INSERT INTO reporting.webhook_deliveries (webhook_id, org_id, event_seq, ordering_key, replay)
         SELECT w.id, e.org_id, e.seq, e.ordering_key, true
           FROM reporting.webhooks w
           JOIN reporting.partner_events e ON e.org_id = w.org_id AND e.type = ANY (w.types)
          WHERE w.id = $1 AND w.org_id = $2 AND e.occurred >= $3::timestamptz AND ($4::timestamptz IS NULL OR e.occurred < $4::timestamptz)
          ORDER BY e.seq
         RETURNING 1`,
        id,
        orgId,
        from,
        to ?? null,
      );
      if (rows.length) deps.queued?.(rows.length);
      return { webhook_id: id, from: from!, to: to ?? null, events: rows.length };
    },
  };
}
export type WebhookService = ReturnType<typeof createWebhookService>;

function instant(reader: QueryReader, name: string, required: boolean): string | undefined {
  const raw = reader.one(name);
  if (raw === undefined) {
    if (required) reader.fail(name, "required", `${name} is required (RFC 3339)`);
    return undefined;
  }
  if (!parseInstant(raw, { maxFractionDigits: 9 })) {
    reader.fail(name, "invalid_value", rfc3339Message(name));
    return undefined;
  }
  return raw;
}
