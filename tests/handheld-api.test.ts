/**
 * Users, sessions and the handheld API (EXTENSIONS.md sections 1 and 2),
 * against a real stack: the admin CLI, login with its cookie and CSRF token,
 * session tokens on /api/v1 with the user's scopes, logout, expiry, a disabled
 * user, the login throttle, lookup, submissions and their outcome, security
 * headers, and tenant isolation.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";
import { runAdminCommand } from "../services/gateway/src/admin/admin-cli.ts";

let stack: Stack;
let sql: pg.Client;
const PASSWORD = "correct horse battery";

type Tenant = Awaited<ReturnType<Stack["tenant"]>>;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  stack = await startStack({ label: "handheld_api" });
  sql = new pg.Client({ connectionString: stack.db.url });
  await sql.connect();
  a = await stack.tenant("Handheld A");
  b = await stack.tenant("Handheld B");
}, 120_000);
afterAll(async () => {
  await sql?.end();
  await stack?.close();
});

let nextUser = 1;
async function createUser(orgId: number, scopes = "all", email = `worker${nextUser++}@example.com`) {
  const user = (await runAdminCommand(["user", "create", "--org", String(orgId), "--email", email, "--scopes", scopes, "--password-stdin"], stack.identity, `${PASSWORD}\n`)) as {
    id: number;
    email: string;
  };
  return user;
}

interface Session {
  token: string;
  csrf: string;
  cookie: string;
  user: { id: number; email: string; org_id: number; scopes: string[] };
}

async function login(email: string, password = PASSWORD): Promise<Session> {
  const res = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email, password } });
  expect(res.statusCode, res.body).toBe(200);
  const setCookie = String(res.headers["set-cookie"]);
  const token = /wa_session=([^;]+)/.exec(setCookie)![1]!;
  return { token, csrf: res.json().data.csrf_token, cookie: `wa_session=${token}`, user: res.json().data.user };
}

const api = (s: Session, method: "GET" | "POST" | "PATCH" | "DELETE", url: string, payload?: unknown) =>
  stack.gateway.inject({ method, url, headers: { authorization: `Bearer ${s.token}` }, ...(payload === undefined ? {} : { payload: payload as object }) });

const page = (s: Session, method: "GET" | "POST", url: string, payload?: unknown, csrf = true) =>
  stack.gateway.inject({
    method,
    url,
    headers: { cookie: s.cookie, ...(csrf ? { "x-whereabouts-csrf": s.csrf } : {}) },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

async function seed(t: Tenant, tag: string) {
  const location = (await stack.gateway.inject({ method: "POST", url: "/api/v1/locations", headers: t.auth, payload: { name: `Dock ${tag}`, external_key: `DOCK-${tag}` } })).json().data;
  const asset = (
    await stack.gateway.inject({ method: "POST", url: "/api/v1/assets", headers: t.auth, payload: { name: `Pallet ${tag}`, external_key: `PAL-${tag}`, tags: [{ tag_type: "rfid", value: `RF-${tag}` }] } })
  ).json().data;
  return { location, asset };
}

const scan = (eventId: string, locationId: number, values: string[]) => ({
  event_id: eventId,
  observed_at: "2026-11-24T08:00:00.000Z",
  location: { id: locationId },
  tags: values.map((value) => ({ tag_type: "rfid", value })),
});

describe("admin CLI users", () => {
  it("creates (password from stdin, never printed), lists and disables users; refuses short passwords and taken emails", async () => {
    const created = (await runAdminCommand(["user", "create", "--org", String(a.orgId), "--email", "Cli.User@Example.com", "--scopes", "scans:write,assets:read", "--password-stdin"], stack.identity, `${PASSWORD}\nignored`)) as Record<string, unknown>;
    expect(Object.keys(created).sort()).toEqual(["created_at", "email", "id", "org_id", "scopes"]);
    expect(created).toMatchObject({ org_id: a.orgId, email: "cli.user@example.com", scopes: ["scans:write", "assets:read"] });
    const stored = await stack.identity.findUser(created.id as number);
    expect(stored!.passwordHash).toMatch(/^scrypt\$/);
    expect(stored!.passwordHash).not.toContain(PASSWORD);

    await expect(runAdminCommand(["user", "create", "--org", String(a.orgId), "--email", "short@example.com", "--scopes", "all", "--password-stdin"], stack.identity, "tooshort\n")).rejects.toThrow(/at least 12/);
    await expect(runAdminCommand(["user", "create", "--org", String(a.orgId), "--email", "cli.user@example.com", "--scopes", "all", "--password-stdin"], stack.identity, `${PASSWORD}\n`)).rejects.toThrow(/already exists/);
    await expect(runAdminCommand(["user", "create", "--org", String(a.orgId), "--email", "x@example.com", "--scopes", "all"], stack.identity, `${PASSWORD}\n`)).rejects.toThrow(/--password-stdin/);

    const listed = (await runAdminCommand(["user", "list", "--org", String(a.orgId)], stack.identity)) as { data: Array<Record<string, unknown>> };
    const row = listed.data.find((u) => u.id === created.id)!;
    expect(row).toMatchObject({ email: "cli.user@example.com", disabled_at: null });
    expect(JSON.stringify(listed)).not.toMatch(/scrypt|password/);

    const disabled = (await runAdminCommand(["user", "disable", "--id", String(created.id)], stack.identity)) as { id: number; disabled_at: string };
    expect(disabled.id).toBe(created.id);
    expect(Date.parse(disabled.disabled_at)).not.toBeNaN();
  });
});

describe("login and sessions", () => {
  it("login answers the user, a CSRF token and the expiry, and sets an HttpOnly SameSite=Strict cookie", async () => {
    const user = await createUser(a.orgId);
    const res = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email.toUpperCase(), password: PASSWORD } });
    expect(res.statusCode).toBe(200);
    const body = res.json().data;
    expect(body.user).toEqual({ id: user.id, email: user.email, org_id: a.orgId, scopes: expect.arrayContaining(["scans:write", "assets:read"]) });
    expect(body.csrf_token).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(Date.parse(body.expires_at) - Date.now()).toBeGreaterThan(43_000_000);
    const cookie = String(res.headers["set-cookie"]);
    expect(cookie).toMatch(/^wa_session=wa_session_[A-Za-z0-9_-]{43}; /);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toMatch(/Secure/);
    // Only a hash is stored.
    const token = /wa_session=([^;]+)/.exec(cookie)![1]!;
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM identity.sessions WHERE hash = $1 OR csrf_hash = $2`, [token, body.csrf_token]);
    expect(rows[0]!.n).toBe(0);
  });

  it("a wrong password and an unknown email get the same 401", async () => {
    const user = await createUser(a.orgId);
    const wrong = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email, password: "not the password" } });
    const unknown = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: "nobody@example.com", password: "not the password" } });
    for (const res of [wrong, unknown]) {
      expect(res.statusCode).toBe(401);
      expect(res.headers["set-cookie"]).toBeUndefined();
      expect(res.json().error).toMatchObject({ type: "unauthorized", status: 401, request_id: res.headers["x-request-id"] });
    }
    expect(wrong.json().error.detail).toBe(unknown.json().error.detail);
    const bad = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email, password: PASSWORD, extra: 1 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.type).toBe("validation_error");
    const notJson = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", headers: { "content-type": "text/plain" }, payload: "x" });
    expect(notJson.statusCode).toBe(415);
  });

  it("a session token is a Bearer token on /api/v1 with the user's scopes and organization", async () => {
    const reader = await createUser(a.orgId, "assets:read");
    const s = await login(reader.email);
    expect((await api(s, "GET", "/api/v1/orgs/me")).json().data).toMatchObject({ id: a.orgId });
    expect((await api(s, "GET", "/api/v1/assets")).statusCode).toBe(200);
    const write = await api(s, "POST", "/api/v1/assets", { name: "nope" });
    expect(write.statusCode).toBe(403);
    expect(write.json().error.type).toBe("forbidden");
    // Another organization's asset does not exist for it.
    const { asset } = await seed(b, `ISO-${nextUser}`);
    expect((await api(s, "GET", `/api/v1/assets/${asset.id}`)).statusCode).toBe(404);
    const malformed = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${s.token}x` } });
    expect(malformed.statusCode).toBe(401);
  });

  it("logout ends the session at once; the cookie is cleared", async () => {
    const user = await createUser(a.orgId);
    const s = await login(user.email);
    expect((await api(s, "GET", "/api/v1/orgs/me")).statusCode).toBe(200);
    const noCsrf = await page(s, "POST", "/handheld/api/logout", undefined, false);
    expect(noCsrf.statusCode).toBe(403);
    const out = await page(s, "POST", "/handheld/api/logout");
    expect(out.statusCode).toBe(204);
    expect(String(out.headers["set-cookie"])).toMatch(/wa_session=; .*Max-Age=0/);
    expect((await page(s, "GET", "/handheld/api/lookup?value=x")).statusCode).toBe(401);
    expect((await api(s, "GET", "/api/v1/orgs/me")).statusCode).toBe(401);
  });

  it("a disabled user's sessions stop working within a second", async () => {
    const user = await createUser(a.orgId);
    const s = await login(user.email);
    expect((await api(s, "GET", "/api/v1/orgs/me")).statusCode).toBe(200);
    await runAdminCommand(["user", "disable", "--id", String(user.id)], stack.identity);
    const started = Date.now();
    await eventually(async () => ((await api(s, "GET", "/api/v1/orgs/me")).statusCode === 401 ? true : undefined), 5_000, 50);
    expect(Date.now() - started).toBeLessThan(1_500);
    const again = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email, password: PASSWORD } });
    expect(again.statusCode).toBe(401);
  });

  it("ten failed sign-ins for one email within 15 minutes give 429, even with the right password", async () => {
    const user = await createUser(a.orgId);
    for (let i = 0; i < 10; i++) {
      const res = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email, password: `wrong ${i}` } });
      expect(res.statusCode).toBe(401);
    }
    const blocked = await stack.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: user.email, password: PASSWORD } });
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().error.type).toBe("rate_limited");
    expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(0);
    // Another email is not affected.
    const other = await createUser(a.orgId);
    await login(other.email);
  });
});

describe("session expiry", () => {
  let short: Stack;
  beforeAll(async () => {
    short = await startStack({ label: "handheld_ttl", services: [], handheld: { sessionTtlS: 1, cookieSecure: true } });
  }, 60_000);
  afterAll(async () => short?.close());

  it("a session ends after SESSION_TTL_S; with COOKIE_SECURE the cookie is Secure", async () => {
    const org = await short.createOrg("TTL");
    await runAdminCommand(["user", "create", "--org", String(org.id), "--email", "ttl@example.com", "--scopes", "all", "--password-stdin"], short.identity, `${PASSWORD}\n`);
    const res = await short.gateway.inject({ method: "POST", url: "/handheld/api/login", payload: { email: "ttl@example.com", password: PASSWORD } });
    expect(String(res.headers["set-cookie"])).toMatch(/; Secure/);
    const token = /wa_session=([^;]+)/.exec(String(res.headers["set-cookie"]))![1]!;
    const me = () => short.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${token}` } });
    expect((await me()).statusCode).toBe(200);
    // The clock has to pass the expiry: polled, with a deadline.
    const expired = await eventually(async () => {
      const r = await me();
      return r.statusCode === 401 ? r : undefined;
    }, 5_000, 100);
    expect(expired.json().error.detail).toMatch(/expired/);
  });
});

describe("handheld API", () => {
  it("lookup finds an asset by its tag (with where it is) and a location by its key, only in the caller's organization", async () => {
    const user = await createUser(a.orgId);
    const s = await login(user.email);
    const { location, asset } = await seed(a, "LK1");
    const byTag = await page(s, "GET", "/handheld/api/lookup?value=RF-LK1");
    expect(byTag.statusCode).toBe(200);
    expect(byTag.json().data.matches).toEqual([
      { kind: "asset", tag_type: "rfid", id: asset.id, external_key: "PAL-LK1", name: "Pallet LK1", location_id: null, location_external_key: null },
    ]);
    const byKey = (await page(s, "GET", "/handheld/api/lookup?value=DOCK-LK1")).json().data.matches;
    expect(byKey).toEqual([expect.objectContaining({ kind: "location", tag_type: null, id: location.id, external_key: "DOCK-LK1", name: "Dock LK1" })]);
    await seed(b, "LK2");
    expect((await page(s, "GET", "/handheld/api/lookup?value=RF-LK2")).json().data.matches).toEqual([]);
    expect((await page(s, "GET", "/handheld/api/lookup")).statusCode).toBe(400);
    expect((await page(s, "GET", "/handheld/api/lookup?value=x&other=1")).statusCode).toBe(400);
    const anonymous = await stack.gateway.inject({ method: "GET", url: "/handheld/api/lookup?value=RF-LK1" });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json().error.type).toBe("unauthorized");
  });

  it("a submission is stored on scans.<org>.handheld-<user>, processed once, and its status tells the assets and the unknown tags", async () => {
    const user = await createUser(a.orgId);
    const s = await login(user.email);
    const { location, asset } = await seed(a, "SUB1");
    const eventId = `evt-sub1-${Date.now()}`;
    const body = scan(eventId, location.id, ["RF-SUB1", "NO-SUCH-TAG"]);
    const accepted = await page(s, "POST", "/handheld/api/scans", body);
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toEqual({ data: { event_id: eventId } });
    // The same event again (an offline retry): accepted, recorded once.
    expect((await page(s, "POST", "/handheld/api/scans", body)).statusCode).toBe(202);
    const status = await eventually(async () => {
      const res = await page(s, "GET", `/handheld/api/scans/${eventId}`);
      return res.json().data.status === "processed" ? res.json().data : undefined;
    }, 20_000);
    expect(status).toEqual({
      status: "processed",
      assets: [{ id: asset.id, external_key: "PAL-SUB1", location_id: location.id }],
      unresolved_tags: [{ tag_type: "rfid", value: "NO-SUCH-TAG" }],
      reason: null,
    });
    // The API shows the position and exactly one history row.
    const after = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${asset.id}/history`, headers: a.auth });
    expect(after.json().data).toHaveLength(1);
    expect(after.json().data[0]).toMatchObject({ location_id: location.id });
    const { rows } = await sql.query(`SELECT 1 FROM tracking.scan_outcomes WHERE org_id = $1 AND event_id = $2`, [a.orgId, eventId]);
    expect(rows).toHaveLength(1);
  });

  it("a submission that resolves nothing is dead-lettered, and the status says why; an unknown event is pending", async () => {
    const user = await createUser(a.orgId);
    const s = await login(user.email);
    const { location } = await seed(a, "DL1");
    const eventId = `evt-dl1-${Date.now()}`;
    expect((await page(s, "POST", "/handheld/api/scans", scan(eventId, location.id, ["UNKNOWN-DL1"]))).statusCode).toBe(202);
    const status = await eventually(async () => {
      const data = (await page(s, "GET", `/handheld/api/scans/${eventId}`)).json().data;
      return data.status === "dead_lettered" ? data : undefined;
    }, 20_000);
    expect(status).toEqual({ status: "dead_lettered", assets: [], unresolved_tags: [{ tag_type: "rfid", value: "UNKNOWN-DL1" }], reason: "no_resolved_tags" });
    expect((await page(s, "GET", `/handheld/api/scans/never-sent`)).json().data).toEqual({ status: "pending", assets: [], unresolved_tags: [], reason: null });
  });

  it("submissions need scans:write, the CSRF header with the cookie, an event_id and the scan payload's rules", async () => {
    const reader = await createUser(a.orgId, "assets:read");
    const r = await login(reader.email);
    const { location } = await seed(a, "RULES");
    const denied = await page(r, "POST", "/handheld/api/scans", scan("e-denied", location.id, ["RF-RULES"]));
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error.detail).toMatch(/scans:write/);

    const writer = await createUser(a.orgId, "scans:write");
    const w = await login(writer.email);
    const noCsrf = await page(w, "POST", "/handheld/api/scans", scan("e-nocsrf", location.id, ["RF-RULES"]), false);
    expect(noCsrf.statusCode).toBe(403);
    const wrongCsrf = await stack.gateway.inject({ method: "POST", url: "/handheld/api/scans", headers: { cookie: w.cookie, "x-whereabouts-csrf": "guess" }, payload: scan("e-wrong", location.id, ["RF-RULES"]) });
    expect(wrongCsrf.statusCode).toBe(403);
    // Bearer (no cookie): no CSRF needed, a cross-site form cannot send it.
    const bearer = await stack.gateway.inject({ method: "POST", url: "/handheld/api/scans", headers: { authorization: `Bearer ${w.token}` }, payload: scan(`e-bearer-${Date.now()}`, location.id, ["RF-RULES"]) });
    expect(bearer.statusCode).toBe(202);
    const { event_id: _omitted, ...noEvent } = scan("x", location.id, ["RF-RULES"]);
    const missing = await page(w, "POST", "/handheld/api/scans", noEvent);
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error.fields).toEqual([expect.objectContaining({ field: "event_id", code: "required" })]);
    const badPayload = await page(w, "POST", "/handheld/api/scans", { ...scan("e-bad", location.id, []), extra: true });
    expect(badPayload.statusCode).toBe(400);
    expect(badPayload.json().error.type).toBe("validation_error");
  });

  it("a session of one organization never sees another's submissions", async () => {
    const ua = await createUser(a.orgId);
    const ub = await createUser(b.orgId);
    const sa = await login(ua.email);
    const sb = await login(ub.email);
    const { location, asset } = await seed(b, "ISO2");
    const eventId = `evt-iso-${Date.now()}`;
    expect((await page(sb, "POST", "/handheld/api/scans", scan(eventId, location.id, ["RF-ISO2"]))).statusCode).toBe(202);
    await eventually(async () => ((await page(sb, "GET", `/handheld/api/scans/${eventId}`)).json().data.status === "processed" ? true : undefined), 20_000);
    expect((await page(sa, "GET", `/handheld/api/scans/${eventId}`)).json().data).toEqual({ status: "pending", assets: [], unresolved_tags: [], reason: null });
    // A's session naming B's location: dead-lettered in A's organization, nothing recorded for B's asset.
    const crossId = `evt-cross-${Date.now()}`;
    expect((await page(sa, "POST", "/handheld/api/scans", scan(crossId, location.id, ["RF-ISO2"]))).statusCode).toBe(202);
    const cross = await eventually(async () => {
      const data = (await page(sa, "GET", `/handheld/api/scans/${crossId}`)).json().data;
      return data.status !== "pending" ? data : undefined;
    }, 20_000);
    expect(cross.status).toBe("dead_lettered");
    const history = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${asset.id}/history`, headers: b.auth });
    expect(history.json().data).toHaveLength(1);
  });
});

describe("the page and its headers", () => {
  it("serves /handheld/ (HTML, script, style) with a strict CSP and no CORS headers; /handheld redirects", async () => {
    const html = await stack.gateway.inject({ method: "GET", url: "/handheld/" });
    expect(html.statusCode).toBe(200);
    expect(html.headers["content-type"]).toMatch(/^text\/html/);
    expect(html.body).toContain('<label for="scan">Scan</label>');
    for (const url of ["/handheld/", "/handheld/app.js", "/handheld/app.css", "/handheld/api/lookup?value=x"]) {
      const res = await stack.gateway.inject({ method: "GET", url, headers: { origin: "https://evil.example" } });
      expect(res.headers["content-security-policy"], url).toMatch(/default-src 'self'/);
      expect(res.headers["content-security-policy"], url).toMatch(/frame-ancestors 'none'/);
      expect(res.headers["x-content-type-options"], url).toBe("nosniff");
      expect(res.headers["referrer-policy"], url).toBe("no-referrer");
      expect(Object.keys(res.headers).filter((h) => h.startsWith("access-control-")), url).toEqual([]);
    }
    expect((await stack.gateway.inject({ method: "GET", url: "/handheld/app.js" })).headers["content-type"]).toMatch(/javascript/);
    const redirect = await stack.gateway.inject({ method: "GET", url: "/handheld" });
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe("/handheld/");
    const post = await stack.gateway.inject({ method: "POST", url: "/handheld/" });
    expect(post.statusCode).toBe(405);
    expect(post.headers.allow).toBe("GET");
    const wrong = await stack.gateway.inject({ method: "GET", url: "/handheld/api/login" });
    expect(wrong.statusCode).toBe(405);
    expect(wrong.json().error.type).toBe("method_not_allowed");
  });
});
