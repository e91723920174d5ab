/**
 * The operation catalog: every public HTTP operation once, with its method
 * and path, the RPC subject it is forwarded on, its scope, the zod schemas
 * of its path parameters, query, body and reply, its success status and its
 * errors. The gateway routes from it, each service's handler table is typed
 * by it, and scripts/openapi.ts renders docs/openapi.json from it alone.
 */
import { z } from "zod";
import { ERROR_TYPES, ErrorEnvelope, type ErrorType } from "../errors.ts";
import { HEADER_REQUEST_ID } from "../rpc.ts";
import { rpcSubject, type ServiceName } from "../subjects.ts";
import { AssetBulkUpload, AssetView, JobRowError, JobView, LocationView, RenameResponse, TagView } from "./catalog.ts";
import {
  AssetCreateRequest,
  AssetPatchRequest,
  LocationCreateRequest,
  LocationPatchRequest,
  RenameRequest,
  TagRequest,
} from "./catalog-requests.ts";
import { DataEnvelope, ListEnvelope, OrgView } from "./common.ts";
import {
  AssetListQuery,
  AssetLocationsQuery,
  EventFeedQuery,
  HistoryListQuery,
  IdParam,
  LocationListQuery,
  NoQuery,
  PageQuery,
  ScanPointListQuery,
  WebhookDeliveriesQuery,
  WebhookReplayQuery,
} from "./operation-queries.ts";
import {
  AssetMissingDataV1,
  AssetMovedDataV1,
  DwellExceededDataV1,
  EVENTS_OPERATIONS,
  EventFeedPage,
  PartnerEvent,
  WebhookCreateRequest,
  WebhookDeliveryView,
  WebhookPatchRequest,
  WebhookReplayResult,
  WebhookView,
  WebhookWithSecret,
  ZoneCrossingDataV1,
} from "./partner-events.ts";
import { AssetLocationItem, REPORT_ASSET_LOCATIONS_OPERATION } from "./reporting.ts";
import {
  LOCATION_SUMMARY_OPERATION,
  LocationSummaryView,
  SCAN_POINT_OPERATIONS,
  ScanPointCreateRequest,
  ScanPointPatchRequest,
  ScanPointView,
} from "./scan-points.ts";
import { OrgSettingsPatch, OrgSettingsView, SETTINGS_OPERATIONS } from "./settings.ts";
import { AssetHistoryItem } from "./tracking.ts";

export const SCOPES = [
  "assets:read",
  "assets:write",
  "locations:read",
  "locations:write",
  "reports:read",
  "scans:write",
  "events:read",
  "webhooks:write",
  "settings:write",
] as const;
export type Scope = (typeof SCOPES)[number];

export const HTTP_METHODS = ["GET", "POST", "PATCH", "DELETE"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** The spec's request media type of each method that carries a JSON body. */
export const BODY_MEDIA_TYPES: Readonly<Partial<Record<string, string>>> = {
  POST: "application/json",
  PATCH: "application/merge-patch+json",
};

/* ------------------------------------------------------------ named schemas */

/**
 * The API's schemas under their public names (the document's components),
 * in the order it lists them. A schema used in several places is named once,
 * so every use refers to it.
 */
export const REPLY_SCHEMAS = z.registry<{ id: string }>();
export const REQUEST_SCHEMAS = z.registry<{ id: string }>();
const named = <T extends z.ZodType>(registry: typeof REPLY_SCHEMAS, id: string, schema: T): T => {
  registry.add(schema, { id });
  return schema;
};
const replyNamed = <T extends z.ZodType>(id: string, schema: T) => named(REPLY_SCHEMAS, id, schema);
const requestNamed = <T extends z.ZodType>(id: string, schema: T) => named(REQUEST_SCHEMAS, id, schema);

for (const [id, schema] of Object.entries({ TagView, AssetView, LocationView, AssetHistoryItem, AssetLocationItem, OrgView, ErrorEnvelope })) {
  replyNamed(id, schema);
}
const TagResponse = replyNamed("TagResponse", DataEnvelope(TagView));
const AssetResponse = replyNamed("AssetResponse", DataEnvelope(AssetView));
const LocationResponse = replyNamed("LocationResponse", DataEnvelope(LocationView));
const OrgResponse = replyNamed("OrgResponse", DataEnvelope(OrgView));
replyNamed("OrgSettings", OrgSettingsView);
const OrgSettingsResponse = replyNamed("OrgSettingsResponse", DataEnvelope(OrgSettingsView));
replyNamed("JobView", JobView);
replyNamed("JobRowError", JobRowError);
const JobResponse = replyNamed("JobResponse", DataEnvelope(JobView));
replyNamed("ScanPointView", ScanPointView);
const ScanPointResponse = replyNamed("ScanPointResponse", DataEnvelope(ScanPointView));
const ScanPointList = replyNamed("ScanPointList", ListEnvelope(ScanPointView));
replyNamed("LocationSummary", LocationSummaryView);
const LocationSummaryResponse = replyNamed("LocationSummaryResponse", DataEnvelope(LocationSummaryView));
const AssetList = replyNamed("AssetList", ListEnvelope(AssetView));
const LocationList = replyNamed("LocationList", ListEnvelope(LocationView));
const AssetHistoryList = replyNamed("AssetHistoryList", ListEnvelope(AssetHistoryItem));
const AssetLocationList = replyNamed("AssetLocationList", ListEnvelope(AssetLocationItem));
const AssetRenameResponse = replyNamed("AssetRenameResponse", RenameResponse(AssetView));
const LocationRenameResponse = replyNamed("LocationRenameResponse", RenameResponse(LocationView));
for (const [id, schema] of Object.entries({ PartnerEvent, AssetMovedDataV1, ZoneCrossingDataV1, DwellExceededDataV1, AssetMissingDataV1 })) {
  replyNamed(id, schema);
}
replyNamed("EventFeedPage", EventFeedPage);
for (const [id, schema] of Object.entries({ WebhookView, WebhookWithSecret, WebhookDeliveryView, WebhookReplayResult })) replyNamed(id, schema);
const WebhookResponse = replyNamed("WebhookResponse", DataEnvelope(WebhookView));
const WebhookSecretResponse = replyNamed("WebhookSecretResponse", DataEnvelope(WebhookWithSecret));
const WebhookList = replyNamed("WebhookList", ListEnvelope(WebhookView));
const WebhookDeliveryList = replyNamed("WebhookDeliveryList", ListEnvelope(WebhookDeliveryView));
const WebhookReplayResponse = replyNamed("WebhookReplayResponse", DataEnvelope(WebhookReplayResult));

for (const [id, schema] of Object.entries({
  AssetBulkUpload,
  TagRequest,
  AssetCreateRequest,
  AssetPatchRequest,
  LocationCreateRequest,
  LocationPatchRequest,
  RenameRequest,
  WebhookCreateRequest,
  WebhookPatchRequest,
  OrgSettingsPatch,
  ScanPointCreateRequest,
  ScanPointPatchRequest,
})) {
  requestNamed(id, schema);
}

/* --------------------------------------------------------------- the model */

export type SuccessStatus = 200 | 201 | 202 | 204;

export interface OperationBody {
  schema: z.ZodType;
  /** The one media type accepted (the method's JSON type unless said otherwise). */
  media: string;
}

export interface Operation {
  /** The RPC operation: forwarded on `<service>.<name>`. */
  readonly name: string;
  /** Who answers; "gateway": the gateway itself (orgs/me). */
  readonly service: ServiceName | "gateway";
  readonly method: HttpMethod;
  /** The route pattern, `:name` for a path parameter. */
  readonly path: string;
  /** null: any authenticated principal. */
  readonly scope: Scope | null;
  readonly summary: string;
  /** Path parameters: all numeric ids in this API. */
  readonly params: z.ZodObject;
  readonly query: z.ZodObject;
  /** Absent: the operation takes no body, and an empty one needs no Content-Type. */
  readonly body?: OperationBody;
  /** The success body; absent for 204. */
  readonly reply?: z.ZodType;
  /** Other representations of the success body, chosen with Accept: media type to what it holds. */
  readonly alternates?: Readonly<Record<string, string>>;
  readonly status: SuccessStatus;
  /**
   * Every error type it can answer: its own, then those of the gateway's
   * pipeline (authentication, scope, methods, rate limit, failures) and, with
   * a body, of the body rules.
   */
  readonly errors: readonly ErrorType[];
  /** The Location header of a create, as a path template. */
  readonly location?: string;
  /** The RPC subject on this stack's broker; null when the gateway answers. */
  readonly subject: string | null;
  /**
   * The answer may come from state checked against the request's `catalog_seq`
   * (a projection, or the catalog's count and page caches): the gateway first
   * reads every write announcement sent before the request (consistency.ts).
   */
  readonly watermarked: boolean;
}

/** Errors of the gateway's pipeline, possible on every operation. */
export const PIPELINE_ERRORS: readonly ErrorType[] = [
  "unauthorized",
  "forbidden",
  "method_not_allowed",
  "rate_limited",
  "internal_error",
  "service_unavailable",
];
/** Errors of the body rules (size, media type), possible on every operation with a body. */
export const BODY_ERRORS: readonly ErrorType[] = ["payload_too_large", "unsupported_media_type"];
/** A request the service refuses: a field error, or a request it cannot read. */
const BAD_INPUT: readonly ErrorType[] = ["validation_error", "bad_request"];

/** What an error answer carries besides the envelope, for the document. */
export const ERROR_HEADERS: Readonly<Partial<Record<ErrorType, string>>> = {
  method_not_allowed: "Allow header lists the supported methods",
  rate_limited: "Retry-After header",
  service_unavailable: "Retry-After header",
};

/** Headers on every answer, for the document. */
export const RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  [HEADER_REQUEST_ID]: "Correlation id (ULID unless the request sent one)",
};

const PATH_PARAM = /:(\w+)/g;

interface OperationInput {
  name: string;
  service: Operation["service"];
  method: HttpMethod;
  path: string;
  scope: Scope | null;
  summary: string;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The body's media type when not the method's JSON type. */
  media?: string;
  reply?: z.ZodType;
  alternates?: Readonly<Record<string, string>>;
  status?: SuccessStatus;
  errors?: readonly ErrorType[];
  location?: string;
  /** A catalog read served from caches kept by `catalog_seq` (see Operation.watermarked). */
  cached?: boolean;
}

function operation(input: OperationInput): Operation {
  const params = z.object(Object.fromEntries([...input.path.matchAll(PATH_PARAM)].map((m) => [m[1]!, IdParam])));
  const media = input.media ?? BODY_MEDIA_TYPES[input.method];
  if (input.body && !media) throw new Error(`${input.name}: a ${input.method} has no body media type`);
  const own = input.errors ?? [];
  const errors = new Set<ErrorType>([...own, ...PIPELINE_ERRORS, ...(input.body ? BODY_ERRORS : [])]);
  return {
    name: input.name,
    service: input.service,
    method: input.method,
    path: input.path,
    scope: input.scope,
    summary: input.summary,
    params,
    query: input.query ?? NoQuery,
    ...(input.body ? { body: { schema: input.body, media: media! } } : {}),
    ...(input.reply ? { reply: input.reply } : {}),
    ...(input.alternates ? { alternates: input.alternates } : {}),
    status: input.status ?? 200,
    errors: [...errors].sort((a, b) => ERROR_TYPES[a].status - ERROR_TYPES[b].status),
    ...(input.location ? { location: input.location } : {}),
    subject: input.service === "gateway" ? null : rpcSubject(input.service, input.name),
    watermarked: input.service === "reporting" || input.service === "tracking" || input.cached === true,
  };
}

const NOT_FOUND: readonly ErrorType[] = [...BAD_INPUT, "not_found"];
const CONFLICT: readonly ErrorType[] = [...BAD_INPUT, "conflict"];
const NOT_FOUND_OR_CONFLICT: readonly ErrorType[] = [...NOT_FOUND, "conflict"];
/** orgs/me and its settings: a key without an organization gets 422 here (the spec's orgs/me rule). */
const ORG_ONLY: readonly ErrorType[] = ["missing_org_context"];

const catalog = (input: Omit<OperationInput, "service">) => operation({ ...input, service: "catalog" });
const reporting = (input: Omit<OperationInput, "service">) => operation({ ...input, service: "reporting" });

/* ---------------------------------------------------------------- the list */

/** Every public operation, in the document's order (paths first seen, then GET, POST, PATCH, DELETE). */
export const OPERATIONS: readonly Operation[] = [
  operation({ name: "orgs.me", service: "gateway", method: "GET", path: "/api/v1/orgs/me", scope: null, summary: "The caller's organization", reply: OrgResponse, errors: ORG_ONLY }),
  // Read by any key of the organization (like orgs/me); changed with settings:write.
  catalog({
    name: SETTINGS_OPERATIONS.get,
    method: "GET",
    path: "/api/v1/orgs/me/settings",
    scope: null,
    summary: "The organization's settings (defaults filled in)",
    reply: OrgSettingsResponse,
    errors: ORG_ONLY,
  }),
  catalog({
    name: SETTINGS_OPERATIONS.update,
    method: "PATCH",
    path: "/api/v1/orgs/me/settings",
    scope: "settings:write",
    summary: "Change the organization's settings (JSON Merge Patch; an unknown setting is 400 unknown_field)",
    body: OrgSettingsPatch,
    reply: OrgSettingsResponse,
    errors: [...BAD_INPUT, ...ORG_ONLY],
  }),
  catalog({
    name: "asset.list",
    method: "GET",
    path: "/api/v1/assets",
    scope: "assets:read",
    summary: "List assets",
    query: AssetListQuery,
    reply: AssetList,
    // EXTENSIONS.md section 3: the CSV export.
    alternates: { "text/csv": "With Accept: text/csv, the filtered, sorted list as CSV in the bulk upload's columns (every row: no paging), streamed" },
    errors: BAD_INPUT,
    cached: true,
  }),
  catalog({
    name: "asset.create",
    method: "POST",
    path: "/api/v1/assets",
    scope: "assets:write",
    summary: "Create an asset",
    body: AssetCreateRequest,
    reply: AssetResponse,
    status: 201,
    errors: CONFLICT,
    location: "/api/v1/assets/{asset_id}",
  }),
  // Static segments win over :asset_id in the router.
  catalog({
    name: "asset.bulk",
    method: "POST",
    path: "/api/v1/assets/bulk",
    scope: "assets:write",
    summary: "Upload assets as CSV (a job): parts file, mode (upsert | create), on_error (abort | skip)",
    body: AssetBulkUpload,
    media: "multipart/form-data",
    reply: JobResponse,
    status: 202,
    errors: BAD_INPUT,
    location: "/api/v1/jobs/{job_id}",
  }),
  // A job is read with the scope of its kind: assets.bulk writes assets.
  catalog({ name: "job.get", method: "GET", path: "/api/v1/jobs/:job_id", scope: "assets:write", summary: "A job and its progress", reply: JobResponse, errors: NOT_FOUND }),
  catalog({ name: "asset.get", method: "GET", path: "/api/v1/assets/:asset_id", scope: "assets:read", summary: "Get an asset", reply: AssetResponse, errors: NOT_FOUND }),
  catalog({
    name: "asset.update",
    method: "PATCH",
    path: "/api/v1/assets/:asset_id",
    scope: "assets:write",
    summary: "Update an asset (JSON Merge Patch)",
    body: AssetPatchRequest,
    reply: AssetResponse,
    errors: NOT_FOUND,
  }),
  catalog({ name: "asset.delete", method: "DELETE", path: "/api/v1/assets/:asset_id", scope: "assets:write", summary: "Soft-delete an asset", status: 204, errors: NOT_FOUND }),
  catalog({
    name: "asset.rename",
    method: "POST",
    path: "/api/v1/assets/:asset_id/rename",
    scope: "assets:write",
    summary: "Change an asset's external_key",
    body: RenameRequest,
    reply: AssetRenameResponse,
    errors: NOT_FOUND_OR_CONFLICT,
  }),
  catalog({
    name: "asset.tag.attach",
    method: "POST",
    path: "/api/v1/assets/:asset_id/tags",
    scope: "assets:write",
    summary: "Attach a tag to an asset",
    body: TagRequest,
    reply: TagResponse,
    status: 201,
    errors: NOT_FOUND_OR_CONFLICT,
    location: "/api/v1/assets/{asset_id}/tags/{tag_id}",
  }),
  catalog({
    name: "asset.tag.detach",
    method: "DELETE",
    path: "/api/v1/assets/:asset_id/tags/:tag_id",
    scope: "assets:write",
    summary: "Detach a tag from an asset",
    status: 204,
    errors: NOT_FOUND,
  }),
  operation({
    name: "history.list",
    service: "tracking",
    method: "GET",
    path: "/api/v1/assets/:asset_id/history",
    scope: "assets:read",
    summary: "An asset's movement history",
    query: HistoryListQuery,
    reply: AssetHistoryList,
    errors: NOT_FOUND,
  }),
  catalog({
    name: "location.list",
    method: "GET",
    path: "/api/v1/locations",
    scope: "locations:read",
    summary: "List locations",
    query: LocationListQuery,
    reply: LocationList,
    errors: BAD_INPUT,
    cached: true,
  }),
  catalog({
    name: "location.create",
    method: "POST",
    path: "/api/v1/locations",
    scope: "locations:write",
    summary: "Create a location",
    body: LocationCreateRequest,
    reply: LocationResponse,
    status: 201,
    errors: CONFLICT,
    location: "/api/v1/locations/{location_id}",
  }),
  catalog({ name: "location.get", method: "GET", path: "/api/v1/locations/:location_id", scope: "locations:read", summary: "Get a location", reply: LocationResponse, errors: NOT_FOUND }),
  catalog({
    name: "location.update",
    method: "PATCH",
    path: "/api/v1/locations/:location_id",
    scope: "locations:write",
    summary: "Update a location (JSON Merge Patch)",
    body: LocationPatchRequest,
    reply: LocationResponse,
    errors: NOT_FOUND,
  }),
  catalog({
    name: "location.delete",
    method: "DELETE",
    path: "/api/v1/locations/:location_id",
    scope: "locations:write",
    summary: "Soft-delete a location (409 while it has live descendants or placed assets)",
    status: 204,
    errors: NOT_FOUND_OR_CONFLICT,
  }),
  catalog({
    name: "location.rename",
    method: "POST",
    path: "/api/v1/locations/:location_id/rename",
    scope: "locations:write",
    summary: "Change a location's external_key",
    body: RenameRequest,
    reply: LocationRenameResponse,
    errors: NOT_FOUND_OR_CONFLICT,
  }),
  catalog({
    name: "location.tag.attach",
    method: "POST",
    path: "/api/v1/locations/:location_id/tags",
    scope: "locations:write",
    summary: "Attach a tag to a location",
    body: TagRequest,
    reply: TagResponse,
    status: 201,
    errors: NOT_FOUND_OR_CONFLICT,
    location: "/api/v1/locations/{location_id}/tags/{tag_id}",
  }),
  catalog({
    name: "location.tag.detach",
    method: "DELETE",
    path: "/api/v1/locations/:location_id/tags/:tag_id",
    scope: "locations:write",
    summary: "Detach a tag from a location",
    status: 204,
    errors: NOT_FOUND,
  }),
  ...(
    [
      ["ancestors", "Parent chain, root first"],
      ["children", "Immediate children, name ascending then id ascending"],
      ["descendants", "Full subtree in depth-first preorder, id ascending tiebreak"],
    ] as const
  ).map(([view, summary]) =>
    catalog({
      name: `location.${view}`,
      method: "GET",
      path: `/api/v1/locations/:location_id/${view}`,
      scope: "locations:read",
      summary,
      query: PageQuery,
      reply: LocationList,
      errors: NOT_FOUND,
    }),
  ),
  // Roll-up over the subtree: reporting holds positions, last seen and validity (see services/reporting/README.md).
  reporting({
    name: LOCATION_SUMMARY_OPERATION,
    method: "GET",
    path: "/api/v1/locations/:location_id/summary",
    scope: "locations:read",
    summary: "Roll-up of a location's subtree: live, currently effective assets here and below, and when one was last seen",
    reply: LocationSummaryResponse,
    errors: NOT_FOUND,
  }),
  // Scan points (EXTENSIONS.md section 5): master data of locations, hence their scopes.
  catalog({
    name: SCAN_POINT_OPERATIONS.list,
    method: "GET",
    path: "/api/v1/scan-points",
    scope: "locations:read",
    summary: "List scan points (currently effective)",
    query: ScanPointListQuery,
    reply: ScanPointList,
    errors: BAD_INPUT,
  }),
  catalog({
    name: SCAN_POINT_OPERATIONS.create,
    method: "POST",
    path: "/api/v1/scan-points",
    scope: "locations:write",
    summary: "Map a reader's source (and antenna) to a location; 409 when the live pair exists",
    body: ScanPointCreateRequest,
    reply: ScanPointResponse,
    status: 201,
    errors: CONFLICT,
    location: "/api/v1/scan-points/{scan_point_id}",
  }),
  catalog({
    name: SCAN_POINT_OPERATIONS.get,
    method: "GET",
    path: "/api/v1/scan-points/:scan_point_id",
    scope: "locations:read",
    summary: "Get a scan point",
    reply: ScanPointResponse,
    errors: NOT_FOUND,
  }),
  catalog({
    name: SCAN_POINT_OPERATIONS.update,
    method: "PATCH",
    path: "/api/v1/scan-points/:scan_point_id",
    scope: "locations:write",
    summary: "Update a scan point (JSON Merge Patch)",
    body: ScanPointPatchRequest,
    reply: ScanPointResponse,
    errors: NOT_FOUND_OR_CONFLICT,
  }),
  catalog({
    name: SCAN_POINT_OPERATIONS.delete,
    method: "DELETE",
    path: "/api/v1/scan-points/:scan_point_id",
    scope: "locations:write",
    summary: "Soft-delete a scan point",
    status: 204,
    errors: NOT_FOUND,
  }),
  reporting({
    name: REPORT_ASSET_LOCATIONS_OPERATION,
    method: "GET",
    path: "/api/v1/reports/asset-locations",
    scope: "reports:read",
    summary: "Where each scanned asset was last seen",
    query: AssetLocationsQuery,
    reply: AssetLocationList,
    errors: BAD_INPUT,
  }),
  // Partner events (EXTENSIONS.md section 4): reading needs events:read, changing webhooks webhooks:write.
  reporting({
    name: EVENTS_OPERATIONS.feed,
    method: "GET",
    path: "/api/v1/events",
    scope: "events:read",
    summary: "Partner events, oldest first, from a cursor (410 when the cursor is past retention)",
    query: EventFeedQuery,
    reply: EventFeedPage,
    errors: [...BAD_INPUT, "gone"],
  }),
  reporting({ name: EVENTS_OPERATIONS.list, method: "GET", path: "/api/v1/webhooks", scope: "events:read", summary: "List webhooks", query: PageQuery, reply: WebhookList, errors: BAD_INPUT }),
  reporting({
    name: EVENTS_OPERATIONS.create,
    method: "POST",
    path: "/api/v1/webhooks",
    scope: "webhooks:write",
    summary: "Subscribe a URL to event types; the signing secret is in this response only",
    body: WebhookCreateRequest,
    reply: WebhookSecretResponse,
    status: 201,
    errors: BAD_INPUT,
    location: "/api/v1/webhooks/{webhook_id}",
  }),
  reporting({
    name: EVENTS_OPERATIONS.get,
    method: "GET",
    path: "/api/v1/webhooks/:webhook_id",
    scope: "events:read",
    summary: "Get a webhook",
    reply: WebhookResponse,
    errors: NOT_FOUND,
  }),
  reporting({
    name: EVENTS_OPERATIONS.update,
    method: "PATCH",
    path: "/api/v1/webhooks/:webhook_id",
    scope: "webhooks:write",
    summary: "Update a webhook (JSON Merge Patch); rotate_secret: true returns a new secret, the old one signs too for 24 h",
    body: WebhookPatchRequest,
    reply: WebhookSecretResponse,
    errors: NOT_FOUND,
  }),
  reporting({
    name: EVENTS_OPERATIONS.delete,
    method: "DELETE",
    path: "/api/v1/webhooks/:webhook_id",
    scope: "webhooks:write",
    summary: "Delete a webhook (nothing more is sent to it)",
    status: 204,
    errors: NOT_FOUND,
  }),
  reporting({
    name: EVENTS_OPERATIONS.deliveries,
    method: "GET",
    path: "/api/v1/webhooks/:webhook_id/deliveries",
    scope: "events:read",
    summary: "The delivery log: one row per attempt, newest first",
    query: WebhookDeliveriesQuery,
    reply: WebhookDeliveryList,
    errors: NOT_FOUND,
  }),
  // Its parameters are all in the query: no body (an empty one needs no Content-Type).
  reporting({
    name: EVENTS_OPERATIONS.replay,
    method: "POST",
    path: "/api/v1/webhooks/:webhook_id/replay",
    scope: "webhooks:write",
    summary: "Send a window of events (of the webhook's types) again, in order",
    query: WebhookReplayQuery,
    reply: WebhookReplayResponse,
    status: 202,
    errors: NOT_FOUND,
  }),
];

/* ------------------------------------------------------------------ lookups */

/** The operations of one path, the gateway's unit of routing (405 with Allow lists their methods). */
export interface OperationRoute {
  path: string;
  /** Path parameter names, in order. */
  params: readonly string[];
  methods: Readonly<Partial<Record<HttpMethod, Operation>>>;
  /** The Allow header: HEAD wherever GET is. */
  allow: string;
}

function groupRoutes(operations: readonly Operation[]): OperationRoute[] {
  const byPath = new Map<string, Operation[]>();
  for (const op of operations) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  return [...byPath].map(([path, ops]) => {
    const methods: Partial<Record<HttpMethod, Operation>> = {};
    for (const op of ops) {
      if (methods[op.method]) throw new Error(`Two operations for ${op.method} ${path}`);
      methods[op.method] = op;
    }
    const allow = (["GET", "HEAD", "POST", "PATCH", "DELETE"] as const).filter((m) => (m === "HEAD" ? methods.GET : methods[m]));
    return { path, params: [...path.matchAll(PATH_PARAM)].map((m) => m[1]!), methods, allow: allow.join(", ") };
  });
}

export const OPERATION_ROUTES: readonly OperationRoute[] = groupRoutes(OPERATIONS);

/** The public operations a service answers (its handler table covers exactly these). */
export function operationsOf(service: ServiceName): readonly Operation[] {
  return OPERATIONS.filter((op) => op.service === service);
}

/** A create's Location header: the operation's template with the new ids filled in. */
export function locationOf(operation: Operation, ids: Readonly<Record<string, number | string>>): string {
  if (!operation.location) throw new Error(`${operation.name} has no Location`);
  return operation.location.replace(/\{(\w+)\}/g, (_, name: string) => {
    const id = ids[name];
    if (id === undefined) throw new Error(`${operation.name}: Location needs ${name}`);
    return String(id);
  });
}

/** The operation named `name` (a programming error when there is none). */
export function operationNamed(service: ServiceName | "gateway", name: string): Operation {
  const found = OPERATIONS.find((op) => op.service === service && op.name === name);
  if (!found) throw new Error(`No public operation ${service}.${name}`);
  return found;
}
