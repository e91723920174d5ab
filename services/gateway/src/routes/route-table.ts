/**
 * The gateway's route table: method and path to service, operation and scope.
 * The gateway knows nothing else about a route; the service owns its rules.
 */
import {
  EVENTS_OPERATIONS,
  LOCATION_SUMMARY_OPERATION,
  SCAN_POINT_OPERATIONS,
  SETTINGS_OPERATIONS,
  type ServiceName,
} from "@whereabouts/shared";

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

export type RouteMethod = "GET" | "POST" | "PATCH" | "DELETE";

export interface RouteOperation {
  service: ServiceName | "gateway";
  operation: string;
  /** null: any authenticated principal (orgs/me). */
  scope: Scope | null;
  /** A POST whose parameters are all in the query: an empty body needs no Content-Type. */
  bodyOptional?: boolean;
}

export interface RouteSpec {
  path: string;
  /** Path parameters that are numeric ids (all of them, in this API). */
  params: string[];
  methods: Partial<Record<RouteMethod, RouteOperation>>;
}

const op = (service: RouteOperation["service"], operation: string, scope: Scope | null): RouteOperation => ({
  service,
  operation,
  scope,
});

export const ROUTES: RouteSpec[] = [
  { path: "/api/v1/orgs/me", params: [], methods: { GET: op("gateway", "orgs.me", null) } },
  {
    path: "/api/v1/orgs/me/settings",
    params: [],
    // Read by any key of the organization (like orgs/me); changed with settings:write.
    methods: {
      GET: op("catalog", SETTINGS_OPERATIONS.get, null),
      PATCH: op("catalog", SETTINGS_OPERATIONS.update, "settings:write"),
    },
  },
  {
    path: "/api/v1/assets",
    params: [],
    methods: { GET: op("catalog", "asset.list", "assets:read"), POST: op("catalog", "asset.create", "assets:write") },
  },
  // Static segments win over :asset_id in the router.
  {
    path: "/api/v1/assets/bulk",
    params: [],
    methods: { POST: op("catalog", "asset.bulk", "assets:write") },
  },
  {
    path: "/api/v1/jobs/:job_id",
    params: ["job_id"],
    // A job is read with the scope of its kind: assets.bulk writes assets.
    methods: { GET: op("catalog", "job.get", "assets:write") },
  },
  {
    path: "/api/v1/assets/:asset_id",
    params: ["asset_id"],
    methods: {
      GET: op("catalog", "asset.get", "assets:read"),
      PATCH: op("catalog", "asset.update", "assets:write"),
      DELETE: op("catalog", "asset.delete", "assets:write"),
    },
  },
  {
    path: "/api/v1/assets/:asset_id/rename",
    params: ["asset_id"],
    methods: { POST: op("catalog", "asset.rename", "assets:write") },
  },
  {
    path: "/api/v1/assets/:asset_id/tags",
    params: ["asset_id"],
    methods: { POST: op("catalog", "asset.tag.attach", "assets:write") },
  },
  {
    path: "/api/v1/assets/:asset_id/tags/:tag_id",
    params: ["asset_id", "tag_id"],
    methods: { DELETE: op("catalog", "asset.tag.detach", "assets:write") },
  },
  {
    path: "/api/v1/assets/:asset_id/history",
    params: ["asset_id"],
    methods: { GET: op("tracking", "history.list", "assets:read") },
  },
  {
    path: "/api/v1/locations",
    params: [],
    methods: {
      GET: op("catalog", "location.list", "locations:read"),
      POST: op("catalog", "location.create", "locations:write"),
    },
  },
  {
    path: "/api/v1/locations/:location_id",
    params: ["location_id"],
    methods: {
      GET: op("catalog", "location.get", "locations:read"),
      PATCH: op("catalog", "location.update", "locations:write"),
      DELETE: op("catalog", "location.delete", "locations:write"),
    },
  },
  {
    path: "/api/v1/locations/:location_id/rename",
    params: ["location_id"],
    methods: { POST: op("catalog", "location.rename", "locations:write") },
  },
  {
    path: "/api/v1/locations/:location_id/tags",
    params: ["location_id"],
    methods: { POST: op("catalog", "location.tag.attach", "locations:write") },
  },
  {
    path: "/api/v1/locations/:location_id/tags/:tag_id",
    params: ["location_id", "tag_id"],
    methods: { DELETE: op("catalog", "location.tag.detach", "locations:write") },
  },
  ...(["ancestors", "children", "descendants"] as const).map(
    (view): RouteSpec => ({
      path: `/api/v1/locations/:location_id/${view}`,
      params: ["location_id"],
      methods: { GET: op("catalog", `location.${view}`, "locations:read") },
    }),
  ),
  // Roll-up over the subtree: reporting holds positions, last seen and validity (see services/reporting/README.md).
  {
    path: "/api/v1/locations/:location_id/summary",
    params: ["location_id"],
    methods: { GET: op("reporting", LOCATION_SUMMARY_OPERATION, "locations:read") },
  },
  // Scan points (EXTENSIONS.md section 5): master data of locations, hence their scopes.
  {
    path: "/api/v1/scan-points",
    params: [],
    methods: {
      GET: op("catalog", SCAN_POINT_OPERATIONS.list, "locations:read"),
      POST: op("catalog", SCAN_POINT_OPERATIONS.create, "locations:write"),
    },
  },
  {
    path: "/api/v1/scan-points/:scan_point_id",
    params: ["scan_point_id"],
    methods: {
      GET: op("catalog", SCAN_POINT_OPERATIONS.get, "locations:read"),
      PATCH: op("catalog", SCAN_POINT_OPERATIONS.update, "locations:write"),
      DELETE: op("catalog", SCAN_POINT_OPERATIONS.delete, "locations:write"),
    },
  },
  {
    path: "/api/v1/reports/asset-locations",
    params: [],
    methods: { GET: op("reporting", "report.asset_locations", "reports:read") },
  },
  // Partner events (EXTENSIONS.md section 4): reading needs events:read, changing webhooks webhooks:write.
  { path: "/api/v1/events", params: [], methods: { GET: op("reporting", EVENTS_OPERATIONS.feed, "events:read") } },
  {
    path: "/api/v1/webhooks",
    params: [],
    methods: {
      GET: op("reporting", EVENTS_OPERATIONS.list, "events:read"),
      POST: op("reporting", EVENTS_OPERATIONS.create, "webhooks:write"),
    },
  },
  {
    path: "/api/v1/webhooks/:webhook_id",
    params: ["webhook_id"],
    methods: {
      GET: op("reporting", EVENTS_OPERATIONS.get, "events:read"),
      PATCH: op("reporting", EVENTS_OPERATIONS.update, "webhooks:write"),
      DELETE: op("reporting", EVENTS_OPERATIONS.delete, "webhooks:write"),
    },
  },
  {
    path: "/api/v1/webhooks/:webhook_id/deliveries",
    params: ["webhook_id"],
    methods: { GET: op("reporting", EVENTS_OPERATIONS.deliveries, "events:read") },
  },
  {
    path: "/api/v1/webhooks/:webhook_id/replay",
    params: ["webhook_id"],
    methods: { POST: { ...op("reporting", EVENTS_OPERATIONS.replay, "webhooks:write"), bodyOptional: true } },
  },
];

/** The Allow header: HEAD wherever GET is supported. */
export function allowedMethods(route: RouteSpec): string[] {
  const methods = Object.keys(route.methods);
  const out: string[] = [];
  for (const m of ["GET", "HEAD", "POST", "PATCH", "DELETE"]) {
    if (m === "HEAD" ? methods.includes("GET") : methods.includes(m)) out.push(m);
  }
  return out;
}
