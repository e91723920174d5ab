/**
 * Builds docs/openapi.json (OpenAPI 3.0.3) from the shared zod contracts and
 * the gateway's route table: every path and method of the public API, request
 * bodies, list parameters, success bodies and the error envelope. HEAD is
 * supported wherever GET is but deliberately not declared.
 *
 *   npx tsx scripts/openapi.ts          writes docs/openapi.json
 *   npx tsx scripts/openapi.ts --check  exits 1 when the file is stale
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import {
  AssetBulkUpload,
  LOCATION_SUMMARY_OPERATION,
  LocationSummaryView,
  SCAN_POINT_OPERATIONS,
  ScanPointCreateRequest,
  ScanPointPatchRequest,
  ScanPointView,
  AssetMissingDataV1,
  AssetMovedDataV1,
  DwellExceededDataV1,
  EventFeedPage,
  PartnerEvent,
  ZoneCrossingDataV1,
  EVENTS_OPERATIONS,
  JobRowError,
  JobView,
  OrgSettingsPatch,
  OrgSettingsView,
  PARTNER_EVENT_TYPES,
  SETTINGS_OPERATIONS,
  WebhookCreateRequest,
  WebhookDeliveryView,
  WebhookPatchRequest,
  WebhookReplayResult,
  WebhookView,
  WebhookWithSecret,
  AssetCreateRequest,
  AssetHistoryItem,
  AssetLocationItem,
  AssetPatchRequest,
  AssetView,
  DataEnvelope,
  ErrorEnvelope,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  ListEnvelope,
  LocationCreateRequest,
  LocationPatchRequest,
  LocationView,
  MAX_ID,
  OFFSET_MAX,
  OrgView,
  Q_MAX_LENGTH,
  RenameRequest,
  RenameResponse,
  TagRequest,
  TagView,
} from "@whereabouts/shared";
import { ROUTES, type RouteMethod } from "../services/gateway/src/routes/route-table.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const OPENAPI_FILE = path.join(root, "docs", "openapi.json");

type Json = Record<string, unknown>;

/* ---------------------------------------------------------------- schemas */

const responseSchemas = {
  TagView,
  AssetView,
  LocationView,
  AssetHistoryItem,
  AssetLocationItem,
  OrgView,
  ErrorEnvelope,
  TagResponse: DataEnvelope(TagView),
  AssetResponse: DataEnvelope(AssetView),
  LocationResponse: DataEnvelope(LocationView),
  OrgResponse: DataEnvelope(OrgView),
  OrgSettings: OrgSettingsView,
  OrgSettingsResponse: DataEnvelope(OrgSettingsView),
  JobView,
  JobRowError,
  JobResponse: DataEnvelope(JobView),
  ScanPointView,
  ScanPointResponse: DataEnvelope(ScanPointView),
  ScanPointList: ListEnvelope(ScanPointView),
  LocationSummary: LocationSummaryView,
  LocationSummaryResponse: DataEnvelope(LocationSummaryView),
  AssetList: ListEnvelope(AssetView),
  LocationList: ListEnvelope(LocationView),
  AssetHistoryList: ListEnvelope(AssetHistoryItem),
  AssetLocationList: ListEnvelope(AssetLocationItem),
  AssetRenameResponse: RenameResponse(AssetView),
  LocationRenameResponse: RenameResponse(LocationView),
  PartnerEvent,
  AssetMovedDataV1,
  ZoneCrossingDataV1,
  DwellExceededDataV1,
  AssetMissingDataV1,
  EventFeedPage,
  WebhookView,
  WebhookWithSecret,
  WebhookDeliveryView,
  WebhookReplayResult,
  WebhookResponse: DataEnvelope(WebhookView),
  WebhookSecretResponse: DataEnvelope(WebhookWithSecret),
  WebhookList: ListEnvelope(WebhookView),
  WebhookDeliveryList: ListEnvelope(WebhookDeliveryView),
  WebhookReplayResponse: DataEnvelope(WebhookReplayResult),
};

const requestSchemas = {
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
};

const SAFE_INT = Number.MAX_SAFE_INTEGER;

/** OpenAPI 3.0 schema objects have no $id; zod's ±2^53 integer bounds are noise. */
function tidy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidy);
  if (!value || typeof value !== "object") return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === "$id") continue;
    if ((key === "minimum" && v === -SAFE_INT) || (key === "maximum" && v === SAFE_INT)) continue;
    out[key] = tidy(v);
  }
  return out;
}

function componentSchemas(schemas: Record<string, z.ZodType>, io: "input" | "output"): Json {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const result = z.toJSONSchema(registry, { target: "openapi-3.0", io, uri: (id) => `#/components/schemas/${id}` });
  return tidy(result.schemas) as Json;
}

/* ------------------------------------------------------------- parameters */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const idSchema = { type: "integer", format: "int64", minimum: 1, maximum: MAX_ID };
const keySchema = { type: "string", minLength: 1, maxLength: 255, pattern: "^[A-Za-z0-9-]+$" };

const query = (name: string, schema: Json, description: string, repeatable = false): Json =>
  repeatable
    ? { name, in: "query", required: false, description, schema: { type: "array", items: schema }, style: "form", explode: true }
    : { name, in: "query", required: false, description, schema };

const pageParams = [
  query("limit", { type: "integer", minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT }, "Page size (at most 200)"),
  query("offset", { type: "integer", minimum: 0, maximum: OFFSET_MAX, default: 0 }, "Rows to skip"),
];
const sortParam = (fields: string[], fallback: string) =>
  query(
    "sort",
    { type: "string" },
    `Comma-separated fields, '-' prefix for descending. Fields: ${fields.join(", ")}. Default: ${fallback}`,
  );
const includeDeleted = query("include_deleted", { type: "boolean", default: false }, "Include soft-deleted rows");
const isActive = query("is_active", { type: "boolean" }, "Filter on is_active");
const q = (what: string) =>
  query("q", { type: "string", maxLength: Q_MAX_LENGTH }, `Case-insensitive substring match on ${what} and active, currently effective tag values`);

const LIST_PARAMS: Record<string, Json[]> = {
  "asset.list": [
    query("external_key", keySchema, "Any of these keys (repeat the parameter)", true),
    query("location_id", idSchema, "Any of these locations; exclusive with location_external_key", true),
    query("location_external_key", keySchema, "Any of these location keys; exclusive with location_id", true),
    isActive,
    includeDeleted,
    q("name, external_key, description"),
    ...pageParams,
    sortParam(["external_key", "name", "created_at", "updated_at"], "external_key, then id"),
  ],
  "location.list": [
    query("external_key", keySchema, "Any of these keys (repeat the parameter)", true),
    query("parent_id", idSchema, "Children of any of these locations; exclusive with parent_external_key", true),
    query("parent_external_key", keySchema, "Children of any of these location keys; exclusive with parent_id", true),
    isActive,
    query("is_zone", { type: "boolean" }, "Filter on is_zone"),
    includeDeleted,
    q("name, external_key, description"),
    ...pageParams,
    sortParam(["external_key", "name", "created_at"], "external_key, then id"),
  ],
  "location.ancestors": pageParams,
  "location.children": pageParams,
  "location.descendants": pageParams,
  "history.list": [
    query("from", { type: "string", format: "date-time" }, "Observation window start (inclusive), RFC 3339"),
    query("to", { type: "string", format: "date-time" }, "Observation window end (exclusive), RFC 3339"),
    ...pageParams,
    sortParam(["event_observed_at"], "-event_observed_at"),
  ],
  [EVENTS_OPERATIONS.feed]: [
    query("after", { type: "string" }, "A next_cursor of this feed: events after it (default: the oldest kept)"),
    query("type", { type: "string", enum: [...PARTNER_EVENT_TYPES] }, "Any of these event types (repeat the parameter)", true),
    pageParams[0]!,
  ],
  [EVENTS_OPERATIONS.list]: pageParams,
  [EVENTS_OPERATIONS.deliveries]: [
    query("state", { type: "string", enum: ["pending", "delivered", "failed"] }, "Any of these states", true),
    query("event_id", { type: "string" }, "Any of these events", true),
    ...pageParams,
  ],
  [EVENTS_OPERATIONS.replay]: [
    { ...query("from", { type: "string", format: "date-time" }, "Events that occurred at or after this instant (RFC 3339)"), required: true },
    query("to", { type: "string", format: "date-time" }, "Events that occurred before this instant (RFC 3339); default: now"),
  ],
  [SCAN_POINT_OPERATIONS.list]: [
    query("source", { type: "string", minLength: 1, maxLength: 255, pattern: "^[A-Za-z0-9_-]+$" }, "Any of these sources (repeat the parameter)", true),
    query("antenna", { type: "integer", minimum: 0, maximum: MAX_ID }, "Any of these antennas", true),
    query("location_id", idSchema, "Any of these locations; exclusive with location_external_key", true),
    query("location_external_key", keySchema, "Any of these location keys; exclusive with location_id", true),
    includeDeleted,
    ...pageParams,
    sortParam(["source", "created_at", "updated_at"], "source (a source's default mapping, antenna null, first), then antenna, then id"),
  ],
  "report.asset_locations": [
    query("location_id", idSchema, "Any of these locations; exclusive with location_external_key", true),
    query("location_external_key", keySchema, "Any of these location keys; exclusive with location_id", true),
    query("asset_id", idSchema, "Any of these assets; exclusive with asset_external_key", true),
    query("asset_external_key", keySchema, "Any of these asset keys; exclusive with asset_id", true),
    includeDeleted,
    q("asset name, asset external_key"),
    ...pageParams,
    sortParam(["asset_last_seen", "asset_external_key", "location_external_key"], "-asset_last_seen"),
  ],
};

/* ------------------------------------------------------------- operations */

interface OperationDoc {
  summary: string;
  request?: string;
  /** The request's media type, when not the method's usual one. */
  requestMedia?: string;
  status: 200 | 201 | 202 | 204;
  response?: string;
  /** Error statuses beyond the common ones. */
  errors: number[];
  location?: string;
}

const OPERATIONS: Record<string, OperationDoc> = {
  "orgs.me": { summary: "The caller's organization", status: 200, response: "OrgResponse", errors: [422] },
  [SETTINGS_OPERATIONS.get]: { summary: "The organization's settings (defaults filled in)", status: 200, response: "OrgSettingsResponse", errors: [422] },
  [SETTINGS_OPERATIONS.update]: {
    summary: "Change the organization's settings (JSON Merge Patch; an unknown setting is 400 unknown_field)",
    request: "OrgSettingsPatch",
    status: 200,
    response: "OrgSettingsResponse",
    errors: [400, 413, 415, 422],
  },
  "asset.list": { summary: "List assets", status: 200, response: "AssetList", errors: [400] },
  "asset.create": {
    summary: "Create an asset",
    request: "AssetCreateRequest",
    status: 201,
    response: "AssetResponse",
    errors: [400, 409, 413, 415],
    location: "/api/v1/assets/{asset_id}",
  },
  "asset.bulk": {
    summary: "Upload assets as CSV (a job): parts file, mode (upsert | create), on_error (abort | skip)",
    request: "AssetBulkUpload",
    requestMedia: "multipart/form-data",
    status: 202,
    response: "JobResponse",
    errors: [400, 413, 415],
    location: "/api/v1/jobs/{job_id}",
  },
  "job.get": { summary: "A job and its progress", status: 200, response: "JobResponse", errors: [400, 404] },
  "asset.get": { summary: "Get an asset", status: 200, response: "AssetResponse", errors: [400, 404] },
  "asset.update": {
    summary: "Update an asset (JSON Merge Patch)",
    request: "AssetPatchRequest",
    status: 200,
    response: "AssetResponse",
    errors: [400, 404, 413, 415],
  },
  "asset.delete": { summary: "Soft-delete an asset", status: 204, errors: [400, 404] },
  "asset.rename": {
    summary: "Change an asset's external_key",
    request: "RenameRequest",
    status: 200,
    response: "AssetRenameResponse",
    errors: [400, 404, 409, 413, 415],
  },
  "asset.tag.attach": {
    summary: "Attach a tag to an asset",
    request: "TagRequest",
    status: 201,
    response: "TagResponse",
    errors: [400, 404, 409, 413, 415],
    location: "/api/v1/assets/{asset_id}/tags/{tag_id}",
  },
  "asset.tag.detach": { summary: "Detach a tag from an asset", status: 204, errors: [400, 404] },
  "history.list": { summary: "An asset's movement history", status: 200, response: "AssetHistoryList", errors: [400, 404] },
  "location.list": { summary: "List locations", status: 200, response: "LocationList", errors: [400] },
  "location.create": {
    summary: "Create a location",
    request: "LocationCreateRequest",
    status: 201,
    response: "LocationResponse",
    errors: [400, 409, 413, 415],
    location: "/api/v1/locations/{location_id}",
  },
  "location.get": { summary: "Get a location", status: 200, response: "LocationResponse", errors: [400, 404] },
  "location.update": {
    summary: "Update a location (JSON Merge Patch)",
    request: "LocationPatchRequest",
    status: 200,
    response: "LocationResponse",
    errors: [400, 404, 413, 415],
  },
  "location.delete": {
    summary: "Soft-delete a location (409 while it has live descendants or placed assets)",
    status: 204,
    errors: [400, 404, 409],
  },
  "location.rename": {
    summary: "Change a location's external_key",
    request: "RenameRequest",
    status: 200,
    response: "LocationRenameResponse",
    errors: [400, 404, 409, 413, 415],
  },
  "location.tag.attach": {
    summary: "Attach a tag to a location",
    request: "TagRequest",
    status: 201,
    response: "TagResponse",
    errors: [400, 404, 409, 413, 415],
    location: "/api/v1/locations/{location_id}/tags/{tag_id}",
  },
  "location.tag.detach": { summary: "Detach a tag from a location", status: 204, errors: [400, 404] },
  "location.ancestors": {
    summary: "Parent chain, root first",
    status: 200,
    response: "LocationList",
    errors: [400, 404],
  },
  "location.children": {
    summary: "Immediate children, name ascending then id ascending",
    status: 200,
    response: "LocationList",
    errors: [400, 404],
  },
  "location.descendants": {
    summary: "Full subtree in depth-first preorder, id ascending tiebreak",
    status: 200,
    response: "LocationList",
    errors: [400, 404],
  },
  [LOCATION_SUMMARY_OPERATION]: {
    summary: "Roll-up of a location's subtree: live, currently effective assets here and below, and when one was last seen",
    status: 200,
    response: "LocationSummaryResponse",
    errors: [400, 404],
  },
  [SCAN_POINT_OPERATIONS.list]: { summary: "List scan points (currently effective)", status: 200, response: "ScanPointList", errors: [400] },
  [SCAN_POINT_OPERATIONS.create]: {
    summary: "Map a reader's source (and antenna) to a location; 409 when the live pair exists",
    request: "ScanPointCreateRequest",
    status: 201,
    response: "ScanPointResponse",
    errors: [400, 409, 413, 415],
    location: "/api/v1/scan-points/{scan_point_id}",
  },
  [SCAN_POINT_OPERATIONS.get]: { summary: "Get a scan point", status: 200, response: "ScanPointResponse", errors: [400, 404] },
  [SCAN_POINT_OPERATIONS.update]: {
    summary: "Update a scan point (JSON Merge Patch)",
    request: "ScanPointPatchRequest",
    status: 200,
    response: "ScanPointResponse",
    errors: [400, 404, 409, 413, 415],
  },
  [SCAN_POINT_OPERATIONS.delete]: { summary: "Soft-delete a scan point", status: 204, errors: [400, 404] },
  "report.asset_locations": {
    summary: "Where each scanned asset was last seen",
    status: 200,
    response: "AssetLocationList",
    errors: [400],
  },
  [EVENTS_OPERATIONS.feed]: {
    summary: "Partner events, oldest first, from a cursor (410 when the cursor is past retention)",
    status: 200,
    response: "EventFeedPage",
    errors: [400, 410],
  },
  [EVENTS_OPERATIONS.create]: {
    summary: "Subscribe a URL to event types; the signing secret is in this response only",
    request: "WebhookCreateRequest",
    status: 201,
    response: "WebhookSecretResponse",
    errors: [400, 413, 415],
    location: "/api/v1/webhooks/{webhook_id}",
  },
  [EVENTS_OPERATIONS.list]: { summary: "List webhooks", status: 200, response: "WebhookList", errors: [400] },
  [EVENTS_OPERATIONS.get]: { summary: "Get a webhook", status: 200, response: "WebhookResponse", errors: [400, 404] },
  [EVENTS_OPERATIONS.update]: {
    summary: "Update a webhook (JSON Merge Patch); rotate_secret: true returns a new secret, the old one signs too for 24 h",
    request: "WebhookPatchRequest",
    status: 200,
    response: "WebhookSecretResponse",
    errors: [400, 404, 413, 415],
  },
  [EVENTS_OPERATIONS.delete]: { summary: "Delete a webhook (nothing more is sent to it)", status: 204, errors: [400, 404] },
  [EVENTS_OPERATIONS.deliveries]: {
    summary: "The delivery log: one row per attempt, newest first",
    status: 200,
    response: "WebhookDeliveryList",
    errors: [400, 404],
  },
  [EVENTS_OPERATIONS.replay]: {
    summary: "Send a window of events (of the webhook's types) again, in order",
    status: 202,
    response: "WebhookReplayResponse",
    errors: [400, 404],
  },
};

const COMMON_ERRORS = [401, 403, 405, 429, 500, 503];
const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "validation_error or bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed (Allow header lists the supported methods)",
  409: "conflict",
  410: "gone",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "missing_org_context",
  429: "rate_limited (Retry-After header)",
  500: "internal_error",
  503: "service_unavailable (Retry-After header)",
};

const MEDIA_TYPES: Partial<Record<RouteMethod, string>> = {
  POST: "application/json",
  PATCH: "application/merge-patch+json",
};

const requestIdHeader = { description: "Correlation id (ULID unless the request sent one)", schema: { type: "string" } };

function errorResponse(status: number): Json {
  return {
    description: ERROR_DESCRIPTIONS[status],
    headers: { "X-Request-ID": requestIdHeader },
    content: { "application/json": { schema: ref("ErrorEnvelope") } },
  };
}

function operationObject(pathTemplate: string, method: RouteMethod, operation: string, scope: string | null): Json {
  const doc = OPERATIONS[operation] ?? { summary: operation, status: 200, errors: [400] };
  const pathParams = [...pathTemplate.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: idSchema,
  }));
  const success: Json = {
    description: doc.status === 204 ? "No content" : "Success",
    headers: {
      "X-Request-ID": requestIdHeader,
      ...(doc.location ? { Location: { description: doc.location, schema: { type: "string" } } } : {}),
    },
    ...(doc.response ? { content: { "application/json": { schema: ref(doc.response) } } } : {}),
  };
  const responses: Json = { [String(doc.status)]: success };
  for (const status of [...new Set([...doc.errors, ...COMMON_ERRORS])].sort((a, b) => a - b)) {
    responses[String(status)] = errorResponse(status);
  }
  return {
    operationId: operation.replace(/\.(\w)/g, (_, c: string) => c.toUpperCase()),
    summary: doc.summary,
    ...(scope ? { description: `Requires scope ${scope}.` } : { description: "Requires no scope." }),
    security: [{ bearerAuth: [] }],
    parameters: [...pathParams, ...(LIST_PARAMS[operation] ?? [])],
    ...(doc.request
      ? { requestBody: { required: true, content: { [doc.requestMedia ?? MEDIA_TYPES[method]!]: { schema: ref(doc.request) } } } }
      : {}),
    responses,
  };
}

export function buildOpenApiDocument(): Json {
  const paths: Json = {};
  for (const route of ROUTES) {
    const template = route.path.replace(/:(\w+)/g, "{$1}");
    const item: Json = {};
    for (const method of ["GET", "POST", "PATCH", "DELETE"] as const) {
      const op = route.methods[method];
      if (op) item[method.toLowerCase()] = operationObject(template, method, op.operation, op.scope);
    }
    paths[template] = item;
  }
  return {
    openapi: "3.0.3",
    info: {
      title: "Whereabouts: asset and location tracking API",
      version: "1.0.0",
      description:
        "Multi-tenant JSON API for assets, locations (a tree) and tags. HEAD is supported wherever GET is, " +
        "with the same status and headers and no body; it is deliberately not declared here. " +
        "Every non-2xx response carries the error envelope (application/json).",
    },
    servers: [{ url: "{base_url}", variables: { base_url: { default: "http://127.0.0.1:8080" } } }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "API key" } },
      schemas: { ...componentSchemas(responseSchemas, "output"), ...componentSchemas(requestSchemas, "input") },
    },
  };
}

export const renderOpenApi = () => `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  const text = renderOpenApi();
  if (process.argv.includes("--check")) {
    const current = await readFile(OPENAPI_FILE, "utf8").catch(() => "");
    if (current !== text) {
      console.error("docs/openapi.json is stale: run npx tsx scripts/openapi.ts");
      process.exit(1);
    }
  } else {
    await writeFile(OPENAPI_FILE, text);
    console.log(`wrote ${path.relative(root, OPENAPI_FILE)}`);
  }
}
