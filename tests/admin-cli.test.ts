/**
 * The admin CLI exactly as an operator runs it (`npm run -s admin -- ...`),
 * as a child process against the test's own database (DECISIONS.md: Issuing
 * keys). Keys it issues are then used against the gateway.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, repoRoot } from "@whereabouts/shared";
import { createTestDatabase } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";

const run = promisify(execFile);
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ALL = ["assets:read", "assets:write", "locations:read", "locations:write", "reports:read", "scans:write", "events:read", "webhooks:write", "settings:write"];

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function admin(args: string[], databaseUrl: string): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
  delete env.GATEWAY_DATABASE_URL;
  try {
    const { stdout, stderr } = await run("npm", ["run", "-s", "admin", "--", ...args], { cwd: repoRoot, env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** stdout must be exactly one JSON object on one line. */
function output(result: CliResult): Record<string, unknown> {
  expect(result.code, result.stderr).toBe(0);
  const lines = result.stdout.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  const value = JSON.parse(lines[0]!);
  expect(typeof value).toBe("object");
  return value;
}

let stack: Stack;
let pool: pg.Pool;
const counts = async () => {
  const { rows } = await pool.query<{ orgs: number; keys: number }>(
    `SELECT (SELECT count(*)::int FROM identity.organizations) AS orgs, (SELECT count(*)::int FROM identity.api_keys) AS keys`,
  );
  return rows[0]!;
};

beforeAll(async () => {
  stack = await startStack({ label: "admin_cli", services: [] });
  pool = createPool(stack.db.url, 2);
});
afterAll(async () => {
  await pool?.end();
  await stack?.close();
});

describe("admin CLI outputs", () => {
  let orgId: number;

  it("org create --name prints {id, name, created_at}", async () => {
    const org = output(await admin(["org", "create", "--name", "Acme Corp"], stack.db.url));
    expect(Object.keys(org)).toEqual(["id", "name", "created_at"]);
    expect(org).toMatchObject({ name: "Acme Corp" });
    expect(org.created_at).toMatch(TIMESTAMP);
    orgId = org.id as number;
    expect(Number.isInteger(orgId)).toBe(true);
  });

  it("key create --scopes all prints the secret once; the key works at the gateway", async () => {
    const key = output(await admin(["key", "create", "--org", String(orgId), "--scopes", "all"], stack.db.url));
    expect(key).toMatchObject({ org_id: orgId, scopes: ALL, expires_at: null });
    expect(Object.keys(key).slice(0, 5)).toEqual(["id", "key", "org_id", "scopes", "expires_at"]);
    expect(key.key).toMatch(/^wa_[A-Za-z0-9]{8}_[A-Za-z0-9]{32}$/);
    const { rows } = await pool.query("SELECT hash, prefix FROM identity.api_keys WHERE id = $1", [key.id]);
    expect(rows[0].hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0].hash).not.toContain(String(key.key));

    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${key.key}` } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: orgId, name: "Acme Corp" });
  });

  it("key create with scopes, --expires-at, --rate-limit and --name", async () => {
    const key = output(
      await admin(
        ["key", "create", "--org", String(orgId), "--scopes", "assets:read, reports:read", "--expires-at", "2099-06-01T12:00:00+02:00", "--rate-limit", "5", "--name", "ci"],
        stack.db.url,
      ),
    );
    expect(key).toMatchObject({ org_id: orgId, scopes: ["assets:read", "reports:read"], expires_at: "2099-06-01T10:00:00.000Z" });
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${key.key}` } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["ratelimit-limit"]).toBe("5");
    const denied = await stack.gateway.inject({ method: "GET", url: "/api/v1/locations", headers: { authorization: `Bearer ${key.key}` } });
    expect(denied.statusCode).toBe(403);
  });

  it("key create --expires-at in the past issues a key that gets 401 expired", async () => {
    const key = output(await admin(["key", "create", "--org", String(orgId), "--scopes", "all", "--expires-at", "2001-01-01T00:00:00Z"], stack.db.url));
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${key.key}` } });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.detail).toBe("API key has expired");
  });

  it("key create --no-org: a principal without organization context", async () => {
    const key = output(await admin(["key", "create", "--no-org", "--scopes", "all"], stack.db.url));
    expect(key).toMatchObject({ org_id: null, scopes: ALL });
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: { authorization: `Bearer ${key.key}` } });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.type).toBe("missing_org_context");
  });

  it("key list prints {data: [...]} without secrets; --org filters", async () => {
    const other = output(await admin(["org", "create", "--name", "Other"], stack.db.url));
    const otherKey = output(await admin(["key", "create", "--org", String(other.id), "--scopes", "reports:read"], stack.db.url));
    const all = await admin(["key", "list"], stack.db.url);
    const list = output(all).data as Array<Record<string, unknown>>;
    expect(list.length).toBe(5);
    expect(list.map((k) => k.id)).toEqual([...list.map((k) => k.id as number)].sort((a, b) => a - b));
    for (const item of list) {
      expect(item).not.toHaveProperty("key");
      expect(item).not.toHaveProperty("hash");
      expect(item).toMatchObject({ id: expect.any(Number), scopes: expect.any(Array) });
    }
    expect(all.stdout).not.toContain(String(otherKey.key));
    expect(all.stdout).not.toContain(String(otherKey.key).slice(12));
    const filtered = output(await admin(["key", "list", "--org", String(other.id)], stack.db.url)).data as Array<Record<string, unknown>>;
    expect(filtered.map((k) => k.id)).toEqual([otherKey.id]);
  });

  it("key revoke --id prints {id, revoked_at}; the key then gets 401 revoked", async () => {
    const key = output(await admin(["key", "create", "--org", String(orgId), "--scopes", "all"], stack.db.url));
    const auth = { authorization: `Bearer ${key.key}` };
    expect((await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: auth })).statusCode).toBe(200);
    const revoked = output(await admin(["key", "revoke", "--id", String(key.id)], stack.db.url));
    expect(Object.keys(revoked)).toEqual(["id", "revoked_at"]);
    expect(revoked.id).toBe(key.id);
    expect(revoked.revoked_at).toMatch(TIMESTAMP);
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: auth });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.detail).toBe("API key has been revoked");
  });
});

describe("admin CLI errors: message on stderr, non-zero exit, nothing written", () => {
  const cases: Array<[string[], RegExp]> = [
    [[], /unknown command/],
    [["key", "rotate", "--id", "1"], /unknown command: key rotate/],
    [["org", "create"], /--name/],
    [["org", "create", "--name", "   "], /--name/],
    [["org", "create", "--name", "A", "--bogus"], /bogus/],
    [["key", "create", "--org", "1"], /--scopes/],
    [["key", "create", "--scopes", "all"], /--org/],
    [["key", "create", "--org", "1", "--no-org", "--scopes", "all"], /mutually exclusive/],
    [["key", "create", "--org", "1", "--scopes", "assets:read,assets:delete"], /assets:delete/],
    [["key", "create", "--org", "abc", "--scopes", "all"], /--org/],
    [["key", "create", "--org", "99999", "--scopes", "all"], /organization 99999 does not exist/],
    [["key", "create", "--org", "1", "--scopes", "all", "--expires-at", "tomorrow"], /--expires-at/],
    [["key", "create", "--org", "1", "--scopes", "all", "--expires-at", "2027-02-30T00:00:00Z"], /--expires-at/],
    [["key", "create", "--org", "1", "--scopes", "all", "--rate-limit", "0"], /--rate-limit/],
    [["key", "revoke"], /--id/],
    [["key", "revoke", "--id", "99999"], /API key 99999 does not exist/],
    [["key", "list", "--org", "x"], /--org/],
  ];

  it("each bad command line", { timeout: 120_000 }, async () => {
    const before = await counts();
    expect(before.orgs).toBeGreaterThan(0); // org 1 exists: its errors are about the arguments
    for (let i = 0; i < cases.length; i += 3) {
      const batch = cases.slice(i, i + 3);
      const results = await Promise.all(batch.map(([args]) => admin(args, stack.db.url)));
      results.forEach((result, j) => {
        const [args, message] = batch[j]!;
        const label = args.join(" ") || "(no arguments)";
        expect(result.code, label).not.toBe(0);
        expect(result.stdout, label).toBe("");
        expect(result.stderr, label).toMatch(message);
      });
    }
    expect(await counts()).toEqual(before);
  });

  it("a bad command line against a database that does not exist yet does not create it", async () => {
    const db = await createTestDatabase("admin_fresh");
    await db.drop();
    const result = await admin(["key", "create", "--org", "1"], db.url);
    expect(result.code).not.toBe(0);
    const { rows } = await pool.query("SELECT 1 FROM pg_database WHERE datname = $1", [new URL(db.url).pathname.slice(1)]);
    expect(rows).toHaveLength(0);
  });

  it("on a fresh machine the first command creates the database and the identity schema", async () => {
    const db = await createTestDatabase("admin_first");
    await db.drop();
    try {
      const org = output(await admin(["org", "create", "--name", "First"], db.url));
      expect(org).toMatchObject({ id: 1, name: "First" });
    } finally {
      await db.drop();
    }
  });
});
