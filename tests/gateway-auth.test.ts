/**
 * Gateway authentication, scopes and organization context, against a real
 * database and nats-server. The domain services are stand-ins (fakeService)
 * that echo what the gateway forwarded, so only the gateway is under test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeService, startStack, type FakeService, type Stack } from "./harness.ts";

const ALL_SCOPES = ["assets:read", "assets:write", "locations:read", "locations:write", "reports:read", "scans:write"];

type Method = "GET" | "HEAD" | "POST" | "PATCH" | "DELETE";
interface Endpoint {
  method: Method;
  path: string;
  /** `<service>.<operation>` the gateway forwards to. */
  subject: string;
  /** The same path with an invalid id, when it has one. */
  badPath?: string;
}

const reads = (path: string, subject: string, badPath?: string): Endpoint[] => [
  { method: "GET", path, subject, ...(badPath ? { badPath } : {}) },
  { method: "HEAD", path, subject, ...(badPath ? { badPath } : {}) },
];

/** DECISIONS.md, Scopes: every public endpoint under the scope that grants it. */
const SCOPE_ROWS: Record<string, Endpoint[]> = {
  "assets:read": [
    ...reads("/api/v1/assets", "catalog.asset.list"),
    ...reads("/api/v1/assets/7", "catalog.asset.get", "/api/v1/assets/0"),
    ...reads("/api/v1/assets/7/history", "tracking.history.list", "/api/v1/assets/abc/history"),
  ],
  "assets:write": [
    { method: "POST", path: "/api/v1/assets", subject: "catalog.asset.create" },
    { method: "PATCH", path: "/api/v1/assets/7", subject: "catalog.asset.update", badPath: "/api/v1/assets/-1" },
    { method: "DELETE", path: "/api/v1/assets/7", subject: "catalog.asset.delete", badPath: "/api/v1/assets/2147483648" },
    { method: "POST", path: "/api/v1/assets/7/rename", subject: "catalog.asset.rename", badPath: "/api/v1/assets/x/rename" },
    { method: "POST", path: "/api/v1/assets/7/tags", subject: "catalog.asset.tag.attach", badPath: "/api/v1/assets/0/tags" },
    { method: "DELETE", path: "/api/v1/assets/7/tags/9", subject: "catalog.asset.tag.detach", badPath: "/api/v1/assets/7/tags/0" },
  ],
  "locations:read": [
    ...reads("/api/v1/locations", "catalog.location.list"),
    ...reads("/api/v1/locations/3", "catalog.location.get", "/api/v1/locations/0"),
    ...reads("/api/v1/locations/3/ancestors", "catalog.location.ancestors", "/api/v1/locations/-5/ancestors"),
    ...reads("/api/v1/locations/3/children", "catalog.location.children", "/api/v1/locations/abc/children"),
    ...reads("/api/v1/locations/3/descendants", "catalog.location.descendants", "/api/v1/locations/99999999999/descendants"),
  ],
  "locations:write": [
    { method: "POST", path: "/api/v1/locations", subject: "catalog.location.create" },
    { method: "PATCH", path: "/api/v1/locations/3", subject: "catalog.location.update", badPath: "/api/v1/locations/0" },
    { method: "DELETE", path: "/api/v1/locations/3", subject: "catalog.location.delete", badPath: "/api/v1/locations/0" },
    { method: "POST", path: "/api/v1/locations/3/rename", subject: "catalog.location.rename", badPath: "/api/v1/locations/0/rename" },
    { method: "POST", path: "/api/v1/locations/3/tags", subject: "catalog.location.tag.attach", badPath: "/api/v1/locations/0/tags" },
    { method: "DELETE", path: "/api/v1/locations/3/tags/4", subject: "catalog.location.tag.detach", badPath: "/api/v1/locations/3/tags/abc" },
  ],
  "reports:read": reads("/api/v1/reports/asset-locations", "reporting.report.asset_locations"),
};

const CONTENT_TYPES: Partial<Record<Method, string>> = { POST: "application/json", PATCH: "application/merge-patch+json" };

let stack: Stack;
let orgId: number;
const fakes: FakeService[] = [];

beforeAll(async () => {
  stack = await startStack({ label: "gw_auth", services: [], rpcTimeoutMs: 2000 });
  for (const service of ["catalog", "tracking", "reporting"] as const) fakes.push(fakeService(stack.nc, service));
  orgId = (await stack.createOrg("Auth Org")).id;
});
afterAll(async () => {
  for (const fake of fakes) fake.stop();
  await stack?.close();
});

const keyFor = async (scopes: string[], org: number | null = orgId) =>
  (await stack.createKey({ org, scopes: scopes.join(",") })).key;

function send(endpoint: { method: Method; path: string }, key: string | undefined, body: unknown = { name: "x" }) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  const contentType = CONTENT_TYPES[endpoint.method];
  if (contentType) headers["content-type"] = contentType;
  return stack.gateway.inject({
    method: endpoint.method,
    url: endpoint.path,
    headers,
    ...(contentType ? { payload: JSON.stringify(body) } : {}),
  });
}

describe("authentication: 401 with the cause in detail", () => {
  const orgsMe = { method: "GET" as const, path: "/api/v1/orgs/me" };
  const expect401 = async (headers: Record<string, string>, detail: string) => {
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers });
    expect(res.statusCode).toBe(401);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.headers["www-authenticate"]).toBe("Bearer");
    expect(res.json().error).toMatchObject({ type: "unauthorized", title: "Unauthorized", status: 401, detail });
  };

  it("missing header", async () => {
    await expect401({}, "Missing Authorization header");
    await expect401({ authorization: "" }, "Missing Authorization header");
  });

  it("wrong scheme", async () => {
    const key = await keyFor(ALL_SCOPES);
    await expect401({ authorization: `Basic ${key}` }, "Authorization scheme must be Bearer");
    await expect401({ authorization: `Token ${key}` }, "Authorization scheme must be Bearer");
    await expect401({ authorization: key }, "Authorization scheme must be Bearer");
  });

  it("malformed key", async () => {
    await expect401({ authorization: "Bearer" }, "Malformed API key");
    await expect401({ authorization: "Bearer not-a-key" }, "Malformed API key");
    await expect401({ authorization: "Bearer wa_short_abc" }, "Malformed API key");
    const key = await keyFor(ALL_SCOPES);
    await expect401({ authorization: `Bearer ${key}x` }, "Malformed API key");
    await expect401({ authorization: `Bearer ${key} extra` }, "Malformed API key");
  });

  it("unknown key (well-formed, never issued)", async () => {
    await expect401({ authorization: `Bearer wa_ABCDEFGH_${"a".repeat(32)}` }, "Unknown API key");
  });

  it("revoked key: refused within 1 s of the revocation although the gateway caches keys", async () => {
    const { id, key } = await stack.createKey({ org: orgId, scopes: "all" });
    expect((await send(orgsMe, key)).statusCode).toBe(200);
    await stack.identity.revokeApiKey(id, new Date());
    const revokedAt = Date.now();
    // Polled, not slept: the first 401 must come before the one-second bound.
    while ((await send(orgsMe, key)).statusCode === 200) expect(Date.now() - revokedAt).toBeLessThan(1000);
    await expect401({ authorization: `Bearer ${key}` }, "API key has been revoked");
  });

  it("expired key; a key expiring later works", async () => {
    const past = await stack.createKey({ org: orgId, scopes: "all", expiresAt: "2020-01-01T00:00:00Z" });
    await expect401({ authorization: `Bearer ${past.key}` }, "API key has expired");
    const future = await stack.createKey({ org: orgId, scopes: "all", expiresAt: "2099-01-01T00:00:00+02:00" });
    expect((await send(orgsMe, future.key)).statusCode).toBe(200);
  });

  it("the scheme is case-insensitive", async () => {
    const key = await keyFor(ALL_SCOPES);
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `bearer ${key}` } });
    expect(res.statusCode).toBe(200);
  });

  it("applies before routing: unknown paths, unsupported methods, HEAD, OPTIONS", async () => {
    for (const [method, url] of [
      ["GET", "/api/v1/nowhere"],
      ["PUT", "/api/v1/assets"],
      ["OPTIONS", "/api/v1/assets"],
      ["HEAD", "/api/v1/assets"],
      ["GET", "/api/v1/assets/0"],
    ] as const) {
      const res = await stack.gateway.inject({ method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.headers.allow).toBeUndefined();
    }
  });

  it("keys are stored only as a hash", async () => {
    const { id, key } = await stack.createKey({ org: orgId, scopes: "all" });
    const row = await stack.identity.findApiKey(id);
    expect(row!.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(row)).not.toContain(key.split("_")[2]);
  });
});

describe("scopes (DECISIONS.md table)", () => {
  for (const [scope, endpoints] of Object.entries(SCOPE_ROWS)) {
    describe(scope, () => {
      let without: string;
      let only: string;
      beforeAll(async () => {
        without = await keyFor(ALL_SCOPES.filter((s) => s !== scope));
        only = await keyFor([scope]);
      });

      for (const endpoint of endpoints) {
        const name = `${endpoint.method} ${endpoint.path}`;
        it(`${name}: 403 without ${scope}, forwarded to ${endpoint.subject} with it`, async () => {
          const denied = await send(endpoint, without);
          expect(denied.statusCode).toBe(403);
          expect(denied.headers["content-type"]).toMatch(/^application\/json/);
          if (endpoint.method === "HEAD") expect(denied.body).toBe("");
          else expect(denied.json().error).toMatchObject({ type: "forbidden", title: "Forbidden", status: 403 });

          const allowed = await send(endpoint, only);
          expect(allowed.statusCode).toBe(200);
          if (endpoint.method !== "HEAD") {
            const echoed = allowed.json().data;
            expect(`${endpoint.subject.split(".")[0]}.${echoed.operation}`).toBe(endpoint.subject);
            expect(echoed.request.principal).toMatchObject({ org_id: orgId, scopes: [scope] });
          }
        });

        if (endpoint.badPath) {
          it(`${name}: an invalid path id without the scope is 403, not 400`, async () => {
            const res = await send({ method: endpoint.method, path: endpoint.badPath! }, without);
            expect(res.statusCode).toBe(403);
            const withScope = await send({ method: endpoint.method, path: endpoint.badPath! }, only);
            expect(withScope.statusCode).toBe(400);
          });
        }

        if (CONTENT_TYPES[endpoint.method]) {
          it(`${name}: a bad body or media type without the scope is 403, not 400/413/415`, async () => {
            const auth = { authorization: `Bearer ${without}` };
            const badJson = await stack.gateway.inject({
              method: endpoint.method,
              url: endpoint.path,
              headers: { ...auth, "content-type": CONTENT_TYPES[endpoint.method]! },
              payload: "{not json",
            });
            expect(badJson.statusCode).toBe(403);
            const badType = await stack.gateway.inject({
              method: endpoint.method,
              url: endpoint.path,
              headers: { ...auth, "content-type": "text/plain" },
              payload: "{}",
            });
            expect(badType.statusCode).toBe(403);
            const tooLarge = await stack.gateway.inject({
              method: endpoint.method,
              url: endpoint.path,
              headers: { ...auth, "content-type": CONTENT_TYPES[endpoint.method]! },
              payload: JSON.stringify({ name: "x".repeat(1024 * 1024 + 10) }),
            });
            expect(tooLarge.statusCode).toBe(403);
          });
        }
      }
    });
  }

  it("scans:write grants no public endpoint; orgs/me needs no scope", async () => {
    const key = await keyFor(["scans:write"]);
    for (const endpoint of Object.values(SCOPE_ROWS).flat()) {
      expect((await send(endpoint, key)).statusCode, `${endpoint.method} ${endpoint.path}`).toBe(403);
    }
    expect((await send({ method: "GET", path: "/api/v1/orgs/me" }, key)).statusCode).toBe(200);
  });

  it("a key with every scope reaches every endpoint", async () => {
    const key = await keyFor(ALL_SCOPES);
    for (const endpoint of Object.values(SCOPE_ROWS).flat()) {
      expect((await send(endpoint, key)).statusCode, `${endpoint.method} ${endpoint.path}`).toBe(200);
    }
  });
});

describe("organization context", () => {
  let noOrg: string;
  beforeAll(async () => {
    noOrg = await keyFor(ALL_SCOPES, null);
  });

  it("GET /api/v1/orgs/me without organization: 422 missing_org_context", async () => {
    const res = await send({ method: "GET", path: "/api/v1/orgs/me" }, noOrg);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      type: "missing_org_context",
      title: "Missing org context",
      status: 422,
      instance: "/api/v1/orgs/me",
    });
    const head = await send({ method: "HEAD", path: "/api/v1/orgs/me" }, noOrg);
    expect(head.statusCode).toBe(422);
    expect(head.body).toBe("");
  });

  it("every other endpoint without organization: 403, never forwarded", async () => {
    const before = fakes.reduce((n, f) => n + f.requests.length, 0);
    for (const endpoint of Object.values(SCOPE_ROWS).flat()) {
      const res = await send(endpoint, noOrg);
      expect(res.statusCode, `${endpoint.method} ${endpoint.path}`).toBe(403);
      if (endpoint.method !== "HEAD") expect(res.json().error.type).toBe("forbidden");
    }
    expect(fakes.reduce((n, f) => n + f.requests.length, 0)).toBe(before);
  });

  it("GET /api/v1/orgs/me returns {data: {id, name, created_at}}", async () => {
    const org = await stack.createOrg("Globex");
    const { key } = await stack.createKey({ org: org.id, scopes: "assets:read" });
    const res = await send({ method: "GET", path: "/api/v1/orgs/me" }, key);
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const body = res.json();
    expect(Object.keys(body)).toEqual(["data"]);
    expect(body.data).toEqual({ id: org.id, name: "Globex", created_at: org.created_at });
    expect(body.data.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("the principal forwarded to services carries key id, org and scopes", async () => {
    const { id, key } = await stack.createKey({ org: orgId, scopes: "assets:read,reports:read" });
    const res = await send({ method: "GET", path: "/api/v1/assets" }, key);
    expect(res.json().data.request.principal).toEqual({ key_id: id, org_id: orgId, scopes: ["assets:read", "reports:read"] });
  });
});
