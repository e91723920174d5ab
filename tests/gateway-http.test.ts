/**
 * The gateway's HTTP rules (spec: HTTP method rules, path parameter rules,
 * errors; DECISIONS.md: 413, 503, probes), against a real database and
 * nats-server. Domain services are stand-ins (fakeService) on real NATS:
 * catalog echoes what it was sent, reporting never answers, tracking is absent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { freePort } from "@whereabouts/shared/testing";
import { buildGateway } from "../services/gateway/src/app.ts";
import { createAuthService } from "../services/gateway/src/identity/auth-service.ts";
import { createMemoryRateLimiter } from "../services/gateway/src/rate-limit/rate-limiter.ts";
import { createLogger } from "@whereabouts/shared";
import { fakeService, startStack, type FakeService, type Stack } from "./harness.ts";

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const MIB = 1024 * 1024;

const RPC_TIMEOUT_MS = 1500;
let stack: Stack;
let auth: Record<string, string>;
let catalog: FakeService;
let reporting: FakeService;
/** Every response this file saw, for the checks that hold on all of them. */
const seen: LightMyRequestResponse[] = [];

/** Custom catalog answers by operation; everything else is echoed. */
const catalogAnswers: Record<string, (request: unknown) => { status: number; headers: Record<string, string>; body?: unknown }> = {
  "asset.delete": () => ({ status: 204, headers: {} }),
  "asset.create": () => ({ status: 201, headers: { location: "/api/v1/assets/5" }, body: { data: { id: 5 } } }),
  "location.get": () => ({
    status: 404,
    headers: {},
    body: {
      error: {
        type: "not_found",
        title: "Not found",
        status: 404,
        detail: "Location not found",
        instance: "/api/v1/locations/12",
        request_id: "set-by-the-service",
      },
    },
  }),
  "location.children": () => ({ status: "not a status" as unknown as number, headers: {} }),
};

beforeAll(async () => {
  // Long enough for a 1 MiB body to go through the echo and back on a busy
  // machine; short enough that "never answers" cases stay quick.
  stack = await startStack({ label: "gw_http", services: [], rpcTimeoutMs: RPC_TIMEOUT_MS });
  catalog = fakeService(stack.nc, "catalog", (operation, request) =>
    catalogAnswers[operation]?.(request) ?? { status: 200, headers: {}, body: { data: { operation, request } } },
  );
  // Answers its ping (so it looks alive) but never a request.
  reporting = fakeService(stack.nc, "reporting", () => null);
  auth = (await stack.tenant("Http Org")).auth;
});
afterAll(async () => {
  catalog?.stop();
  reporting?.stop();
  await stack?.close();
});

async function call(options: InjectOptions & { headers?: Record<string, string> }): Promise<LightMyRequestResponse> {
  const res = await stack.gateway.inject({ ...options, headers: { ...auth, ...options.headers } });
  seen.push(res);
  return res;
}

/** A gateway of the test's own on the stack's broker and identity (its watermarks given). */
function ownGateway(watermarks: Parameters<typeof buildGateway>[0]["watermarks"] = { seqFor: () => 0 }) {
  return buildGateway({
    logger: createLogger("test", "silent"),
    nc: stack.nc,
    auth: createAuthService(stack.identity),
    identity: stack.identity,
    rateLimiter: createMemoryRateLimiter(60_000),
    rateLimit: { max: 1000, windowMs: 60_000 },
    rpcTimeoutMs: 5000,
    readyTimeoutMs: 500,
    watermarks,
  });
}

/** The envelope, checked field by field; returns its `error`. */
function expectEnvelope(res: LightMyRequestResponse, type: string, title: string, status: number, instance: string) {
  expect(res.statusCode).toBe(status);
  expect(res.headers["content-type"]).toBe("application/json");
  const body = res.json();
  expect(Object.keys(body)).toEqual(["error"]);
  const error = body.error;
  const keys = ["type", "title", "status", "detail", "instance", "request_id", ...(type === "validation_error" ? ["fields"] : [])];
  expect(Object.keys(error).sort()).toEqual(keys.sort());
  expect(error).toMatchObject({ type, title, status, instance });
  expect(typeof error.detail).toBe("string");
  expect(error.detail.length).toBeGreaterThan(0);
  expect(error.request_id).toBe(res.headers["x-request-id"]);
  return error;
}

/** Spec endpoints and the Allow header each path must send. */
const PATHS: Array<[string, string[]]> = [
  ["/api/v1/orgs/me", ["GET", "HEAD"]],
  ["/api/v1/assets", ["GET", "HEAD", "POST"]],
  ["/api/v1/assets/1", ["GET", "HEAD", "PATCH", "DELETE"]],
  ["/api/v1/assets/1/rename", ["POST"]],
  ["/api/v1/assets/1/tags", ["POST"]],
  ["/api/v1/assets/1/tags/2", ["DELETE"]],
  ["/api/v1/assets/1/history", ["GET", "HEAD"]],
  ["/api/v1/locations", ["GET", "HEAD", "POST"]],
  ["/api/v1/locations/1", ["GET", "HEAD", "PATCH", "DELETE"]],
  ["/api/v1/locations/1/rename", ["POST"]],
  ["/api/v1/locations/1/tags", ["POST"]],
  ["/api/v1/locations/1/tags/2", ["DELETE"]],
  ["/api/v1/locations/1/ancestors", ["GET", "HEAD"]],
  ["/api/v1/locations/1/children", ["GET", "HEAD"]],
  ["/api/v1/locations/1/descendants", ["GET", "HEAD"]],
  ["/api/v1/reports/asset-locations", ["GET", "HEAD"]],
];

describe("405 method_not_allowed with Allow", () => {
  for (const [path, allowed] of PATHS) {
    it(`${path}: ${allowed.join(", ")}`, async () => {
      for (const method of ["OPTIONS", "PUT", "TRACE", "PROPFIND", "GET", "POST", "PATCH", "DELETE"] as const) {
        if (allowed.includes(method)) continue;
        const res = await call({ method: method as InjectOptions["method"], url: path, headers: { origin: "https://evil.example" } });
        const error = expectEnvelope(res, "method_not_allowed", "Method not allowed", 405, path);
        const allow = String(res.headers.allow);
        expect(allow.split(", ").sort()).toEqual([...allowed].sort());
        expect(error.detail).toBe(`Allowed methods: ${allow}`);
      }
    });
  }

  it("HEAD is allowed exactly where GET is", async () => {
    for (const [path, allowed] of PATHS) {
      const res = await call({ method: "HEAD", url: path });
      if (allowed.includes("GET")) expect(res.statusCode, path).not.toBe(405);
      else {
        expect(res.statusCode, path).toBe(405);
        expect(res.body).toBe("");
      }
    }
  });

  it("the method is checked before path ids and scopes", async () => {
    const res = await call({ method: "PUT", url: "/api/v1/assets/0" });
    expect(res.statusCode).toBe(405);
    const { key } = await stack.createKey({ org: (await stack.createOrg()).id, scopes: "scans:write" });
    const noScope = await call({ method: "OPTIONS", url: "/api/v1/assets", headers: { authorization: `Bearer ${key}` } });
    expect(noScope.statusCode).toBe(405);
  });

  it("OPTIONS preflight gets 405 and no CORS headers", async () => {
    const res = await call({
      method: "OPTIONS",
      url: "/api/v1/assets",
      headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "authorization" },
    });
    expectEnvelope(res, "method_not_allowed", "Method not allowed", 405, "/api/v1/assets");
    for (const name of Object.keys(res.headers)) expect(name.toLowerCase()).not.toMatch(/^access-control-/);
  });
});

describe("415 unsupported_media_type", () => {
  const POST_DETAIL = "Content-Type must be application/json";
  const PATCH_DETAIL = "Content-Type must be application/merge-patch+json on PATCH operations";
  const cases: Array<[method: "POST" | "PATCH", url: string, contentType: string | undefined, ok: boolean]> = [
    ["POST", "/api/v1/assets", undefined, false],
    ["POST", "/api/v1/assets", "text/plain", false],
    ["POST", "/api/v1/assets", "application/merge-patch+json", false],
    ["POST", "/api/v1/assets", "application/json; charset=iso-8859-1", false],
    ["POST", "/api/v1/assets", "application/json; boundary=x", false],
    ["POST", "/api/v1/assets", "application/jsonx", false],
    ["POST", "/api/v1/assets", "not a media type", false],
    ["POST", "/api/v1/assets", "application/json", true],
    ["POST", "/api/v1/assets", "application/json; charset=utf-8", true],
    ["POST", "/api/v1/assets", "Application/JSON;charset=UTF-8", true],
    ["POST", "/api/v1/assets", 'application/json; charset="utf-8"', true],
    ["PATCH", "/api/v1/assets/1", undefined, false],
    ["PATCH", "/api/v1/assets/1", "application/json", false],
    ["PATCH", "/api/v1/assets/1", "application/merge-patch+json; charset=latin1", false],
    ["PATCH", "/api/v1/assets/1", "application/merge-patch+json", true],
    ["PATCH", "/api/v1/assets/1", "application/merge-patch+json; charset=utf-8", true],
  ];
  for (const [method, url, contentType, ok] of cases) {
    it(`${method} with ${contentType ?? "no Content-Type"}: ${ok ? "accepted" : "415"}`, async () => {
      const res = await call({
        method,
        url,
        headers: contentType === undefined ? {} : { "content-type": contentType },
        payload: '{"name":"A"}',
      });
      if (ok) {
        expect(res.statusCode).toBe(method === "POST" ? 201 : 200);
        return;
      }
      const error = expectEnvelope(res, "unsupported_media_type", "Unsupported media type", 415, url);
      expect(error.detail).toBe(method === "POST" ? POST_DETAIL : PATCH_DETAIL);
    });
  }

  it("POST without a body and without Content-Type is 415 too", async () => {
    const res = await call({ method: "POST", url: "/api/v1/assets/1/rename" });
    expect(expectEnvelope(res, "unsupported_media_type", "Unsupported media type", 415, "/api/v1/assets/1/rename").detail).toBe(POST_DETAIL);
  });

  it("DELETE needs no Content-Type", async () => {
    const res = await call({ method: "DELETE", url: "/api/v1/assets/1" });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe("");
  });
});

describe("request bodies", () => {
  const json = { "content-type": "application/json" };

  it("a body over 1 MiB is 413 payload_too_large", async () => {
    const payload = JSON.stringify({ name: "x".repeat(MIB) });
    const res = await call({ method: "POST", url: "/api/v1/assets", headers: json, payload });
    expectEnvelope(res, "payload_too_large", "Payload too large", 413, "/api/v1/assets");
    const patch = await call({
      method: "PATCH",
      url: "/api/v1/assets/1",
      headers: { "content-type": "application/merge-patch+json" },
      payload: Buffer.alloc(MIB + 1, 0x20),
    });
    expectEnvelope(patch, "payload_too_large", "Payload too large", 413, "/api/v1/assets/1");
  });

  it("a body of exactly 1 MiB is forwarded to the service", async () => {
    const head = '{"name":"';
    const payload = head + "y".repeat(MIB - head.length - 2) + '"}';
    expect(Buffer.byteLength(payload)).toBe(MIB);
    const res = await call({ method: "POST", url: "/api/v1/assets/1/tags", headers: json, payload });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.request.body.name).toHaveLength(MIB - head.length - 2);
  });

  for (const [label, payload] of [
    ["syntax error", "{not json"],
    ["trailing garbage", '{"a":1} x'],
    ["empty body", ""],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
  ] as const) {
    it(`${label}: 400 bad_request 'Request body is not valid JSON'`, async () => {
      const res = await call({ method: "POST", url: "/api/v1/assets", headers: json, payload });
      const error = expectEnvelope(res, "bad_request", "Bad request", 400, "/api/v1/assets");
      expect(error.detail).toBe("Request body is not valid JSON");
      expect(error.fields).toBeUndefined();
      const patch = await call({
        method: "PATCH",
        url: "/api/v1/locations/2",
        headers: { "content-type": "application/merge-patch+json" },
        payload,
      });
      expect(expectEnvelope(patch, "bad_request", "Bad request", 400, "/api/v1/locations/2").detail).toBe("Request body is not valid JSON");
    });
  }

  it("top-level null on PATCH: 'Request body must be a JSON object (RFC 7396)'", async () => {
    for (const url of ["/api/v1/assets/1", "/api/v1/locations/1"]) {
      const res = await call({ method: "PATCH", url, headers: { "content-type": "application/merge-patch+json" }, payload: " null " });
      const error = expectEnvelope(res, "bad_request", "Bad request", 400, url);
      expect(error.detail).toBe("Request body must be a JSON object (RFC 7396)");
    }
  });

  it("a decoded body travels to the service as JSON", async () => {
    const res = await call({
      method: "PATCH",
      url: "/api/v1/assets/12",
      headers: { "content-type": "application/merge-patch+json" },
      payload: '{"name":"Pallet","description":null,"__proto__":{"x":1}}',
    });
    expect(res.statusCode).toBe(200);
    const { operation, request } = res.json().data;
    expect(operation).toBe("asset.update");
    expect(request.body).toEqual(JSON.parse('{"name":"Pallet","description":null,"__proto__":{"x":1}}'));
  });
});

describe("path ids", () => {
  const cases: Array<[url: string, field: string, code: string, params?: Record<string, number>]> = [
    ["/api/v1/assets/0", "asset_id", "too_small"],
    ["/api/v1/assets/-1", "asset_id", "too_small"],
    ["/api/v1/assets/2147483648", "asset_id", "too_large", { max: 2147483647 }],
    ["/api/v1/assets/99999999999999999999999999", "asset_id", "too_large", { max: 2147483647 }],
    [`/api/v1/assets/${"9".repeat(300)}`, "asset_id", "too_large", { max: 2147483647 }],
    ["/api/v1/assets/abc", "asset_id", "invalid_value"],
    ["/api/v1/assets/1.5", "asset_id", "invalid_value"],
    ["/api/v1/assets/1e3", "asset_id", "invalid_value"],
    ["/api/v1/assets/%20", "asset_id", "invalid_value"],
    ["/api/v1/locations/0/children", "location_id", "too_small"],
    ["/api/v1/locations/2147483648/ancestors", "location_id", "too_large", { max: 2147483647 }],
    ["/api/v1/assets/5/history?limit=1", "asset_id", "ok"],
  ];
  for (const [url, field, code, params] of cases) {
    it(`${url.slice(0, 60)} → ${code}`, async () => {
      const res = await call({ method: "GET", url });
      const instance = url.split("?")[0]!;
      if (code === "ok") {
        expect(res.statusCode).toBe(503); // tracking is absent: the id itself passed
        return;
      }
      const error = expectEnvelope(res, "validation_error", "Validation failed", 400, instance);
      expect(error.fields).toHaveLength(1);
      expect(error.fields[0]).toMatchObject({ field, code });
      if (params) expect(error.fields[0].params).toMatchObject(params);
      expect(error.detail).toBe(error.fields[0].message);
    });
  }

  it("the bounds 1 and 2147483647 pass", async () => {
    for (const id of ["1", "2147483647"]) {
      const res = await call({ method: "GET", url: `/api/v1/assets/${id}` });
      expect(res.statusCode).toBe(200);
      expect(res.json().data.request.params).toEqual({ asset_id: id });
    }
  });

  it("every bad id is listed, the detail counts the rest", async () => {
    const res = await call({ method: "DELETE", url: "/api/v1/locations/0/tags/abc" });
    const error = expectEnvelope(res, "validation_error", "Validation failed", 400, "/api/v1/locations/0/tags/abc");
    expect(error.fields.map((f: { field: string; code: string }) => [f.field, f.code])).toEqual([
      ["location_id", "too_small"],
      ["tag_id", "invalid_value"],
    ]);
    expect(error.detail).toBe(`${error.fields[0].message} (and 1 more validation error)`);
  });

  it("ids are checked before the body", async () => {
    const res = await call({ method: "PATCH", url: "/api/v1/assets/0", headers: { "content-type": "text/plain" }, payload: "x" });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.type).toBe("validation_error");
  });
});

describe("HEAD parity", () => {
  const volatile = new Set(["date", "ratelimit-remaining", "ratelimit-reset"]);
  const targets: Array<[string, number, Record<string, string>?]> = [
    ["/api/v1/assets?x=1", 200],
    ["/api/v1/orgs/me", 200],
    ["/api/v1/assets/0", 400],
    ["/api/v1/locations/12", 404],
    ["/api/v1/nowhere", 404],
    ["/api/v1/assets/1/history", 503],
    ["/api/v1/assets/1/rename", 405],
    ["/api/v1/assets", 401, { authorization: "Bearer nope" }],
  ];
  for (const [url, status, headers] of targets) {
    it(`${url} → ${status}`, async () => {
      const requestId = `parity-${status}-${url.length}`;
      const get = await call({ method: "GET", url, headers: { "x-request-id": requestId, ...headers } });
      const head = await call({ method: "HEAD", url, headers: { "x-request-id": requestId, ...headers } });
      expect(get.statusCode).toBe(status);
      expect(head.statusCode).toBe(status);
      expect(head.body).toBe("");
      expect(get.body.length).toBeGreaterThan(0);
      const strip = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => !volatile.has(k)));
      expect(strip(head.headers)).toEqual(strip(get.headers));
      for (const name of volatile) if (name !== "date") expect(Object.keys(head.headers)).toContain(name);
    });
  }

  it("HEAD is forwarded as GET", async () => {
    const before = catalog.requests.length;
    await call({ method: "HEAD", url: "/api/v1/locations?q=a" });
    expect(catalog.requests.slice(before).map((r) => [r.operation, r.request.method])).toEqual([["location.list", "GET"]]);
  });
});

describe("X-Request-ID", () => {
  it("an inbound id is echoed unchanged, whatever its format", async () => {
    for (const id of ["abc", "req-123/xyz:=,;", "x".repeat(300), "01JD3Q8Z5S7V4T0M2W6Y1X9R8K", "with spaces inside"]) {
      const ok = await call({ method: "GET", url: "/api/v1/assets", headers: { "x-request-id": id } });
      expect(ok.headers["x-request-id"]).toBe(id);
      expect(ok.json().data.request.request_id).toBe(id);
      const bad = await call({ method: "GET", url: "/api/v1/assets/0", headers: { "x-request-id": id } });
      expect(bad.headers["x-request-id"]).toBe(id);
      expect(bad.json().error.request_id).toBe(id);
    }
  });

  it("otherwise a fresh ULID per request, equal to error.request_id", async () => {
    const a = await call({ method: "GET", url: "/api/v1/assets/0" });
    const b = await call({ method: "GET", url: "/api/v1/assets/0" });
    const c = await call({ method: "GET", url: "/api/v1/assets" });
    for (const res of [a, b, c]) expect(res.headers["x-request-id"]).toMatch(ULID);
    expect(a.headers["x-request-id"]).not.toBe(b.headers["x-request-id"]);
    expect(a.json().error.request_id).toBe(a.headers["x-request-id"]);
    expect(c.json().data.request.request_id).toBe(c.headers["x-request-id"]);
    const unauth = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets" });
    expect(unauth.headers["x-request-id"]).toMatch(ULID);
    expect(unauth.json().error.request_id).toBe(unauth.headers["x-request-id"]);
  });

  it("a service's error envelope gets the gateway's request id", async () => {
    const res = await call({ method: "GET", url: "/api/v1/locations/12", headers: { "x-request-id": "mine" } });
    const error = expectEnvelope(res, "not_found", "Not found", 404, "/api/v1/locations/12");
    expect(error.request_id).toBe("mine");
  });
});

describe("routing and forwarding", () => {
  it("unknown paths are 404 not_found", async () => {
    for (const url of ["/api/v1/nowhere", "/api/v2/assets", "/api/v1/assets/1/unknown", "/", "/api/v1/assets/1/tags/2/x"]) {
      expectEnvelope(await call({ method: "GET", url }), "not_found", "Not found", 404, url);
    }
    expectEnvelope(await call({ method: "POST", url: "/api/v1/nowhere?x=1" }), "not_found", "Not found", 404, "/api/v1/nowhere");
  });

  it("the RPC envelope: route pattern, path, params, every query value in order, body", async () => {
    const res = await call({
      method: "POST",
      url: "/api/v1/assets/42/rename?b=2&a=1&a=x,y&empty=",
      headers: { "content-type": "application/json" },
      payload: '{"external_key":"K-1"}',
    });
    expect(res.statusCode).toBe(200);
    const { operation, request } = res.json().data;
    expect(operation).toBe("asset.rename");
    expect(request).toMatchObject({
      method: "POST",
      route: "/api/v1/assets/:asset_id/rename",
      path: "/api/v1/assets/42/rename",
      params: { asset_id: "42" },
      body: { external_key: "K-1" },
    });
    expect(request.query).toEqual({ b: ["2"], a: ["1", "x,y"], empty: [""] });
  });

  it("reads served against catalog_seq first read the write announcements sent before them; other reads do not wait", async () => {
    // A stand-in for watchCatalogWrites: an announcement (seq 7) is read only when the gateway settles.
    let known = 3;
    let settles = 0;
    const app = await ownGateway({
      seqFor: () => known,
      settled: async () => {
        settles++;
        known = 7;
      },
    });
    try {
      const seqOf = async (url: string) => {
        const res = await app.inject({ method: "GET", url, headers: auth });
        expect(res.statusCode, res.body).toBe(200);
        return res.json().data.request.catalog_seq as number;
      };
      // A read by id goes to the database itself: no wait.
      expect(await seqOf("/api/v1/assets/5")).toBe(3);
      expect(settles).toBe(0);
      // A list may be served from the catalog's page cache: it carries the settled watermark.
      expect(await seqOf("/api/v1/assets")).toBe(7);
      expect(settles).toBe(1);
      expect(await seqOf("/api/v1/locations?limit=5")).toBe(7);
      expect(settles).toBe(2);
    } finally {
      await app.close();
    }
  });

  it("the service's status, headers and body are rendered as is", async () => {
    const created = await call({ method: "POST", url: "/api/v1/assets", headers: { "content-type": "application/json" }, payload: "{}" });
    expect(created.statusCode).toBe(201);
    expect(created.headers.location).toBe("/api/v1/assets/5");
    expect(created.headers["content-type"]).toMatch(/^application\/json/);
    expect(created.json()).toEqual({ data: { id: 5 } });
  });

  it("a malformed reply from a service is 500 internal_error, text hidden", async () => {
    const res = await call({ method: "GET", url: "/api/v1/locations/1/children" });
    const error = expectEnvelope(res, "internal_error", "Internal server error", 500, "/api/v1/locations/1/children");
    expect(error.detail).toBe("An unexpected error occurred");
  });
});

describe("503 service_unavailable", () => {
  it("no responder: 503 with Retry-After, at once", async () => {
    const started = Date.now();
    const res = await call({ method: "GET", url: "/api/v1/assets/1/history" });
    expect(Date.now() - started).toBeLessThan(400);
    expectEnvelope(res, "service_unavailable", "Service unavailable", 503, "/api/v1/assets/1/history");
    expect(Number(res.headers["retry-after"])).toBeGreaterThanOrEqual(1);
  });

  it("a responder that never replies: 503 after the RPC timeout", async () => {
    const started = Date.now();
    const res = await call({ method: "GET", url: "/api/v1/reports/asset-locations" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(RPC_TIMEOUT_MS - 50);
    expectEnvelope(res, "service_unavailable", "Service unavailable", 503, "/api/v1/reports/asset-locations");
    expect(Number(res.headers["retry-after"])).toBeGreaterThanOrEqual(1);
  });
});

describe("probes", () => {
  it("/healthz: 200 without a key, outside the rate limit", async () => {
    const res = await stack.gateway.inject({ method: "GET", url: "/healthz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
    expect(res.headers["x-request-id"]).toMatch(ULID);
    expect(res.headers["ratelimit-limit"]).toBeUndefined();
    const head = await stack.gateway.inject({ method: "HEAD", url: "/healthz" });
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe("");
    const post = await stack.gateway.inject({ method: "POST", url: "/healthz" });
    expect(post.statusCode).toBe(405);
    expect(post.headers.allow).toBe("GET, HEAD");
  });

  it("/readyz: 503 while a service does not answer, 200 when all do", async () => {
    const down = await stack.gateway.inject({ method: "GET", url: "/readyz" });
    expect(down.statusCode).toBe(503);
    expect(down.json().error).toMatchObject({ type: "service_unavailable", title: "Service unavailable", instance: "/readyz" });
    expect(down.json().error.detail).toContain("tracking");
    expect(down.json().error.detail).not.toContain("catalog");
    expect(Number(down.headers["retry-after"])).toBeGreaterThanOrEqual(1);

    const tracking = fakeService(stack.nc, "tracking");
    try {
      const up = await stack.gateway.inject({ method: "GET", url: "/readyz" });
      expect(up.statusCode).toBe(200);
      expect(up.json()).toEqual({ status: "ready", checks: { nats: true, catalog: true, tracking: true, reporting: true } });
    } finally {
      tracking.stop();
    }
    await stack.nc.flush();
    const again = await stack.gateway.inject({ method: "GET", url: "/readyz" });
    expect(again.statusCode).toBe(503);
  });
});

describe("framework-level errors keep the envelope", () => {
  it("a path that is not valid percent-encoding: 400 bad_request (after authentication)", async () => {
    const res = await call({ method: "GET", url: "/api/v1/assets/%E0%A4%A" });
    expectEnvelope(res, "bad_request", "Bad request", 400, "/api/v1/assets/%E0%A4%A");
    const unauth = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets/%E0%A4%A" });
    expect(unauth.statusCode).toBe(401);
    expect(unauth.json().error.request_id).toBe(unauth.headers["x-request-id"]);
  });
});

describe("graceful shutdown", () => {
  it("a request in flight completes while the gateway closes; later connections are refused", async () => {
    let arrived!: () => void;
    const received = new Promise<void>((r) => (arrived = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = fakeService(stack.nc, "tracking", async (operation, request) => {
      arrived();
      await gate;
      return { status: 200, headers: {}, body: { data: { operation, path: request.path } } };
    });
    const app = await ownGateway();
    const port = await freePort();
    await app.listen({ host: "127.0.0.1", port });
    try {
      const inFlight = fetch(`http://127.0.0.1:${port}/api/v1/assets/3/history`, { headers: auth });
      await received;
      let isClosed = false;
      const closed = app.close().then(() => (isClosed = true));
      // Closing stops new connections at once but waits for the request in flight.
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
      expect(isClosed).toBe(false);
      release();
      const res = await inFlight;
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ data: { operation: "history.list", path: "/api/v1/assets/3/history" } });
      await closed;
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    } finally {
      slow.stop();
      await app.close();
    }
  });
});

describe("every response", () => {
  it("has no Access-Control-Allow-* header, an X-Request-ID, and RateLimit-* headers", () => {
    expect(seen.length).toBeGreaterThan(100);
    for (const res of seen) {
      for (const name of Object.keys(res.headers)) expect(name.toLowerCase()).not.toMatch(/^access-control-/);
      expect(res.headers["x-request-id"]).toBeTruthy();
      for (const name of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(res.headers[name]).toBeDefined();
      if (res.statusCode >= 400 && res.body !== "") expect(res.headers["content-type"]).toMatch(/^application\/json/);
    }
  });
});
