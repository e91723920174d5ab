import { describe, expect, it } from "vitest";
import { AppError } from "@whereabouts/shared";
import { generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey } from "./api-key.ts";
import { createAuthService } from "./auth-service.ts";
import type { ApiKeyRow } from "./identity-store.ts";

function storeWith(rows: ApiKeyRow[]) {
  const touched: number[] = [];
  const lookups: string[] = [];
  return {
    touched,
    lookups,
    findApiKeyByHash: async (hash: string) => {
      lookups.push(hash);
      return rows.find((r) => r.hash === hash) ?? null;
    },
    touchApiKey: async (id: number) => {
      touched.push(id);
    },
    findSessionByHash: async () => null,
  };
}

const row = (key: string, overrides: Partial<ApiKeyRow> = {}): ApiKeyRow => ({
  id: 1,
  orgId: 7,
  name: null,
  prefix: key.slice(3, 11),
  hash: hashApiKey(key),
  scopes: ["assets:read"],
  rateLimit: null,
  expiresAt: null,
  revokedAt: null,
  lastUsedAt: null,
  createdAt: new Date(0),
  ...overrides,
});

async function detail(promise: Promise<unknown>) {
  try {
    await promise;
    return "ok";
  } catch (err) {
    return err instanceof AppError ? `${err.status} ${err.detail}` : String(err);
  }
}

describe("API keys", () => {
  it("are wa_<8>_<32>, random, and hashed with SHA-256", () => {
    const a = generateApiKey();
    const b = generateApiKey();
    expect(a.key).toMatch(/^wa_[A-Za-z0-9]{8}_[A-Za-z0-9]{32}$/);
    expect(a.key).not.toBe(b.key);
    expect(a.prefix).toBe(a.key.slice(3, 11));
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(isWellFormedApiKey(a.key)).toBe(true);
    expect(hashesEqual(a.hash, hashApiKey(a.key))).toBe(true);
    expect(hashesEqual(a.hash, b.hash)).toBe(false);
    expect(hashesEqual(a.hash, "ab")).toBe(false);
    // Stored hashes are SHA-256 of the key's UTF-8 text in hex: keys issued before stay valid.
    expect(hashApiKey("wa_ABCDEFGH_abcdefghijklmnopqrstuvwxyz012345")).toBe("cb16e0edfb90b71a797e030b48a65598115e4e36a7f8823bdab80b8ef2674ae0");
  });
});

describe("authenticate", () => {
  const { key } = generateApiKey();
  const now = new Date("2030-01-01T00:00:00Z");

  it.each([
    [undefined, "401 Missing Authorization header"],
    ["   ", "401 Missing Authorization header"],
    [`Basic ${key}`, "401 Authorization scheme must be Bearer"],
    [key, "401 Authorization scheme must be Bearer"],
    ["Bearer", "401 Malformed API key"],
    ["Bearer    ", "401 Malformed API key"],
    [`Bearer ${key.slice(0, -1)}`, "401 Malformed API key"],
    [`Bearer ${generateApiKey().key}`, "401 Unknown API key"],
    [`Bearer ${key}`, "ok"],
    [`bearer   ${key}  `, "ok"],
  ])("%j → %s", async (header, expected) => {
    const auth = createAuthService(storeWith([row(key)]), () => now);
    expect(await detail(auth.authenticate(header))).toBe(expected);
  });

  it("revoked before expired; expiry is exclusive of the instant itself", async () => {
    const revoked = createAuthService(storeWith([row(key, { revokedAt: now, expiresAt: new Date(0) })]), () => now);
    expect(await detail(revoked.authenticate(`Bearer ${key}`))).toBe("401 API key has been revoked");
    const atExpiry = createAuthService(storeWith([row(key, { expiresAt: now })]), () => now);
    expect(await detail(atExpiry.authenticate(`Bearer ${key}`))).toBe("401 API key has expired");
    const before = createAuthService(storeWith([row(key, { expiresAt: new Date(now.getTime() + 1) })]), () => now);
    expect(await detail(before.authenticate(`Bearer ${key}`))).toBe("ok");
  });

  it("returns the principal and the key's own rate limit, touching last use at most once a minute", async () => {
    const store = storeWith([row(key, { rateLimit: 9, orgId: null, scopes: ["a", "b"] })]);
    let t = now.getTime();
    const auth = createAuthService(store, () => new Date(t));
    expect(await auth.authenticate(`Bearer ${key}`)).toEqual({ principal: { key_id: 1, org_id: null, scopes: ["a", "b"] }, rateLimit: 9, bucket: "key:1" });
    await auth.authenticate(`Bearer ${key}`);
    t += 61_000;
    await auth.authenticate(`Bearer ${key}`);
    expect(store.touched).toEqual([1, 1]);
  });

  it("caches a key for the TTL only: a revocation is seen once the copy is older than the TTL", async () => {
    const rows = [row(key)];
    const store = storeWith(rows);
    let t = now.getTime();
    const auth = createAuthService(store, () => new Date(t), { cacheTtlMs: 500 });
    expect(await detail(auth.authenticate(`Bearer ${key}`))).toBe("ok");
    rows[0] = row(key, { revokedAt: new Date(t) });
    t += 499;
    expect(await detail(auth.authenticate(`Bearer ${key}`))).toBe("ok");
    expect(store.lookups).toHaveLength(1);
    t += 1;
    expect(await detail(auth.authenticate(`Bearer ${key}`))).toBe("401 API key has been revoked");
    expect(store.lookups).toHaveLength(2);
  });

  it("checks expiry against the clock on every request, cached or not", async () => {
    let t = now.getTime();
    const store = storeWith([row(key, { expiresAt: new Date(t + 100) })]);
    const auth = createAuthService(store, () => new Date(t), { cacheTtlMs: 60_000 });
    expect(await detail(auth.authenticate(`Bearer ${key}`))).toBe("ok");
    t += 100;
    expect(await detail(auth.authenticate(`Bearer ${key}`))).toBe("401 API key has expired");
    expect(store.lookups).toHaveLength(1);
  });

  it("shares one lookup between concurrent requests and caches unknown keys briefly", async () => {
    const store = storeWith([row(key)]);
    let t = now.getTime();
    const auth = createAuthService(store, () => new Date(t), { cacheTtlMs: 500 });
    const results = await Promise.all(Array.from({ length: 20 }, () => detail(auth.authenticate(`Bearer ${key}`))));
    expect(new Set(results)).toEqual(new Set(["ok"]));
    expect(store.lookups).toHaveLength(1);
    const unknown = generateApiKey().key;
    for (let i = 0; i < 5; i++) expect(await detail(auth.authenticate(`Bearer ${unknown}`))).toBe("401 Unknown API key");
    expect(store.lookups).toHaveLength(2);
    t += 500;
    expect(await detail(auth.authenticate(`Bearer ${unknown}`))).toBe("401 Unknown API key");
    expect(store.lookups).toHaveLength(3);
  });
});
