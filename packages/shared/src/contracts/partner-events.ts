/**
 * Events for partners (EXTENSIONS.md section 4): the feed `GET /api/v1/events`
 * and the webhooks that push the same events. Every type has a versioned
 * schema of its `data`; the envelope is `{id, type, occurred_at, org_id, data}`.
 * They are derived from the CATALOG and TRACKING streams by reporting
 * (services/reporting/src/events), never written by hand.
 */
import { z } from "zod";
import { Id, noNul, Timestamp } from "./common.ts";
import { AssetView, LocationView, TagRecord } from "./catalog.ts";

/** The version of every `data` schema below; a breaking change adds a new one. */
export const PARTNER_EVENT_SCHEMA_VERSION = 1;

export const PARTNER_EVENT_TYPES = [
  "asset.created",
  "asset.updated",
  "asset.renamed",
  "asset.deleted",
  "asset.moved",
  "location.created",
  "location.updated",
  "location.renamed",
  "location.deleted",
  "tag.attached",
  "tag.detached",
  "zone.entered",
  "zone.exited",
  "asset.dwell_exceeded",
  "asset.missing",
] as const;
export type PartnerEventType = (typeof PARTNER_EVENT_TYPES)[number];
export const PartnerEventTypeSchema = z.enum(PARTNER_EVENT_TYPES);

/** `asset.moved`: the location changed (never a re-read at the same place). From is null on the first placement. */
export const AssetMovedDataV1 = z
  .object({
    asset_id: Id,
    asset_external_key: z.string().nullable(),
    from_location_id: Id.nullable(),
    from_location_external_key: z.string().nullable(),
    to_location_id: Id,
    to_location_external_key: z.string().nullable(),
    observed_at: Timestamp,
  })
  .meta({ id: "AssetMovedDataV1" });

/** `zone.entered` / `zone.exited` (section 5): the asset's position crossed a zone's subtree boundary. */
export const ZoneCrossingDataV1 = z
  .object({
    asset_id: Id,
    asset_external_key: z.string().nullable(),
    zone_id: Id,
    zone_external_key: z.string().nullable(),
    observed_at: Timestamp,
  })
  .meta({ id: "ZoneCrossingDataV1" });

/** `asset.dwell_exceeded` (section 5): longer at a location than its `max_dwell_s`. */
export const DwellExceededDataV1 = z
  .object({
    asset_id: Id,
    asset_external_key: z.string().nullable(),
    location_id: Id,
    location_external_key: z.string().nullable(),
    since: Timestamp,
    max_dwell_s: z.number().int().nonnegative(),
  })
  .meta({ id: "DwellExceededDataV1" });

/** `asset.missing` (section 5): not seen for the organization's `missing_after_s`. */
export const AssetMissingDataV1 = z
  .object({
    asset_id: Id,
    asset_external_key: z.string().nullable(),
    last_seen_at: Timestamp,
    last_location_id: Id.nullable(),
    missing_after_s: z.number().int().min(1),
  })
  .meta({ id: "AssetMissingDataV1" });

/** The `data` schema of each type. */
export const PARTNER_EVENT_DATA = {
  "asset.created": AssetView,
  "asset.updated": AssetView,
  "asset.renamed": AssetView,
  "asset.deleted": AssetView,
  "asset.moved": AssetMovedDataV1,
  "location.created": LocationView,
  "location.updated": LocationView,
  "location.renamed": LocationView,
  "location.deleted": LocationView,
  "tag.attached": TagRecord,
  "tag.detached": TagRecord,
  "zone.entered": ZoneCrossingDataV1,
  "zone.exited": ZoneCrossingDataV1,
  "asset.dwell_exceeded": DwellExceededDataV1,
  "asset.missing": AssetMissingDataV1,
} as const satisfies Record<PartnerEventType, z.ZodType>;

const envelope = <T extends PartnerEventType>(type: T) =>
  z.object({
    id: z.string().meta({ description: "ULID" }),
    type: z.literal(type),
    occurred_at: Timestamp,
    org_id: Id,
    data: PARTNER_EVENT_DATA[type],
  });

/** One event of the feed and of a webhook's POST body. */
export const PartnerEvent = z
  .discriminatedUnion(
    "type",
    PARTNER_EVENT_TYPES.map((type) => envelope(type)) as unknown as [ReturnType<typeof envelope>, ...ReturnType<typeof envelope>[]],
  )
  .meta({ id: "PartnerEvent" });
export type PartnerEvent = { id: string; type: PartnerEventType; occurred_at: string; org_id: number; data: unknown };

/** `GET /api/v1/events`: oldest first; `next_cursor` resumes after the last event (or where the request started). */
export const EventFeedPage = z
  .object({ data: z.array(PartnerEvent), next_cursor: z.string() })
  .meta({ id: "EventFeedPage" });

/* ---------------------------------------------------------------- webhooks */

export const WEBHOOK_URL_MAX_LENGTH = 2048;
export const WEBHOOK_DESCRIPTION_MAX_LENGTH = 1000;
/** Deliveries: a 2xx within this long is delivered. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** A failing delivery is retried for this long, then `failed`. */
export const WEBHOOK_RETRY_WINDOW_MS = 24 * 3600 * 1000;
/** After a rotation the old secret signs too, for this long. */
export const WEBHOOK_SECRET_OVERLAP_MS = 24 * 3600 * 1000;

export const WebhookView = z
  .object({
    id: Id,
    url: z.string(),
    types: z.array(PartnerEventTypeSchema),
    description: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "WebhookView" });
export type WebhookView = z.infer<typeof WebhookView>;

/** On create and on `rotate_secret`: the record with its secret, shown this once. */
export const WebhookWithSecret = WebhookView.extend({ secret: z.string() }).meta({ id: "WebhookWithSecret" });

const webhookUrl = z
  .string()
  .min(1)
  .max(WEBHOOK_URL_MAX_LENGTH)
  .superRefine(noNul("url"))
  .superRefine((value, ctx) => {
    const problem = webhookUrlProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
const webhookTypes = z
  .array(PartnerEventTypeSchema)
  .min(1)
  .max(PARTNER_EVENT_TYPES.length)
  .superRefine((types, ctx) => {
    if (new Set(types).size !== types.length) ctx.addIssue({ code: "custom", message: "types must not repeat a type" });
  });
const description = z.string().max(WEBHOOK_DESCRIPTION_MAX_LENGTH).superRefine(noNul("description")).nullable();

export const WebhookCreateRequest = z
  .object({ url: webhookUrl, types: webhookTypes, description: description.optional() })
  .strict()
  .meta({ id: "WebhookCreateRequest" });
export type WebhookCreateRequest = z.infer<typeof WebhookCreateRequest>;

export const WebhookPatchRequest = z
  .object({
    url: webhookUrl.optional(),
    types: webhookTypes.optional(),
    description: description.optional(),
    /** true: a new secret (in the response); the old one keeps signing for 24 h. */
    rotate_secret: z.boolean().optional(),
  })
  .strict()
  .meta({ id: "WebhookPatchRequest" });
export type WebhookPatchRequest = z.infer<typeof WebhookPatchRequest>;

/** The shape of a target URL (where it resolves is checked by the service). */
export function webhookUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "url must be an absolute http or https URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "url must be an absolute http or https URL";
  if (url.username || url.password) return "url must not carry credentials";
  if (url.hash) return "url must not have a fragment";
  return undefined;
}

/** One attempt of one delivery (`GET /api/v1/webhooks/<id>/deliveries`). */
export const WebhookDeliveryView = z
  .object({
    event_id: z.string(),
    event_type: PartnerEventTypeSchema,
    attempt: z.number().int().min(1),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int().nullable(),
    attempted_at: Timestamp,
    next_attempt_at: Timestamp.nullable().meta({ description: "When the next attempt is due (state pending)" }),
    state: z.enum(["pending", "delivered", "failed"]),
    error: z.string().nullable().meta({ description: "Why the attempt failed, when it had no HTTP status (timeout, refused address...)" }),
  })
  .meta({ id: "WebhookDeliveryView" });
export type WebhookDeliveryView = z.infer<typeof WebhookDeliveryView>;

export const WebhookReplayResult = z
  .object({ webhook_id: Id, from: Timestamp, to: Timestamp.nullable(), events: z.number().int().nonnegative() })
  .meta({ id: "WebhookReplayResult" });

export const EVENTS_OPERATIONS = {
  feed: "events.list",
  create: "webhook.create",
  list: "webhook.list",
  get: "webhook.get",
  update: "webhook.update",
  delete: "webhook.delete",
  deliveries: "webhook.deliveries",
  replay: "webhook.replay",
} as const;
