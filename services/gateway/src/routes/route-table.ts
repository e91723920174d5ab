/**
 * The gateway's route table: method and path to service, operation and scope.
 * The gateway knows nothing else about a route; the service owns its rules.
 */
import type { ServiceName } from "@whereabouts/shared";

export const SCOPES = [
  "assets:read",
  "assets:write",
  "locations:read",
  "locations:write",
  "reports:read",
  "scans:write",
] as const;
export type Scope = (typeof SCOPES)[number];

export type RouteMethod = "GET" | "POST" | "PATCH" | "DELETE";

export interface RouteOperation {
  service: ServiceName | "gateway";
  operation: string;
  /** null: any authenticated principal (orgs/me). */
  scope: Scope | null;
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
    path: "/api/v1/assets",
    params: [],
    methods: { GET: op("catalog", "asset.list", "assets:read"), POST: op("catalog", "asset.create", "assets:write") },
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
  {
    path: "/api/v1/reports/asset-locations",
    params: [],
    methods: { GET: op("reporting", "report.asset_locations", "reports:read") },
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
