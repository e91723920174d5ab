/**
 * Authenticates a request's Authorization header into a principal: an API
 * key, or a user's session token (EXTENSIONS.md section 1: the same 401/403/422
 * rules, the user's scopes). The handheld page's cookie carries the same token.
 *
 * Key rows are cached by hash for at most `cacheTtlMs` (default 500 ms), so a
 * hot key costs no database round trip per request while a revocation still
 * reaches every gateway replica within a second: each replica re-reads the row
 * once its copy is older than the TTL. Expiry is checked against the clock on
 * every request. Unknown keys are cached too (briefly), so a flood of made-up
 * keys cannot turn into a flood of queries; concurrent misses share one query.
 */
import { unauthorized, type Principal } from "@whereabouts/shared";
import { hashApiKey, hashesEqual, isWellFormedApiKey } from "./api-key.ts";
import { isWellFormedSessionToken } from "./credentials.ts";
import type { ApiKeyRow, IdentityStore, SessionRow } from "./identity-store.ts";

export interface AuthenticatedKey {
  principal: Principal;
  /** The key's own limit per window, when it overrides the default. */
  rateLimit: number | null;
  /** Set when a user's session authenticated the request. */
  session?: SessionRow;
  /** The rate-limit bucket: per key, or per user. */
  bucket: string;
}

interface CachedSession {
  row: SessionRow | null;
  fetchedAt: number;
}

const TOUCH_INTERVAL_MS = 60_000;
const MAX_CACHED_KEYS = 10_000;

interface CachedKey {
  row: ApiKeyRow | null;
  principal: Principal | null;
  fetchedAt: number;
}

export function createAuthService(
  store: Pick<IdentityStore, "findApiKeyByHash" | "touchApiKey" | "findSessionByHash">,
  now = () => new Date(),
  options: { cacheTtlMs?: number } = {},
) {
  const cacheTtlMs = options.cacheTtlMs ?? 500;
  const lastTouched = new Map<number, number>();
  const cache = new Map<string, CachedKey>();
  const loading = new Map<string, Promise<CachedKey>>();

  function load(hash: string, at: number): Promise<CachedKey> {
    let pending = loading.get(hash);
    if (!pending) {
      pending = store
        .findApiKeyByHash(hash)
        .then((row) => {
          const entry: CachedKey = {
            row,
            principal: row ? { key_id: row.id, org_id: row.orgId, scopes: row.scopes } : null,
            fetchedAt: at,
          };
          // Oldest first out (Map keeps insertion order; a refresh re-inserts).
          cache.delete(hash);
          if (cache.size >= MAX_CACHED_KEYS) cache.delete(cache.keys().next().value!);
          cache.set(hash, entry);
          return entry;
        })
        .finally(() => loading.delete(hash));
      loading.set(hash, pending);
    }
    return pending;
  }

  // Sessions: the same cache discipline as keys (revocation, logout and a
  // disabled user reach every replica within cacheTtlMs).
  const sessions = new Map<string, CachedSession>();
  const loadingSessions = new Map<string, Promise<CachedSession>>();
  function loadSession(hash: string, at: number): Promise<CachedSession> {
    let pending = loadingSessions.get(hash);
    if (!pending) {
      pending = store
        .findSessionByHash(hash)
        .then((row) => {
          const entry = { row, fetchedAt: at };
          sessions.delete(hash);
          if (sessions.size >= MAX_CACHED_KEYS) sessions.delete(sessions.keys().next().value!);
          sessions.set(hash, entry);
          return entry;
        })
        .finally(() => loadingSessions.delete(hash));
      loadingSessions.set(hash, pending);
    }
    return pending;
  }

  /** A session token (from the Authorization header or the page's cookie) into its user's principal. */
  async function authenticateSession(token: string): Promise<AuthenticatedKey> {
    if (!isWellFormedSessionToken(token)) throw unauthorized("Malformed session token");
    const hash = hashApiKey(token);
    const ms = now().getTime();
    let entry = sessions.get(hash);
    if (!entry || ms - entry.fetchedAt >= cacheTtlMs || ms < entry.fetchedAt) entry = await loadSession(hash, ms);
    const row = entry.row;
    if (!row || !hashesEqual(row.hash, hash)) throw unauthorized("Unknown session");
    if (row.revokedAt) throw unauthorized("The session has ended");
    if (row.expiresAt.getTime() <= ms) throw unauthorized("The session has expired");
    if (row.user.disabledAt) throw unauthorized("The user is disabled");
    return {
      principal: { key_id: 0, user_id: row.user.id, org_id: row.user.orgId, scopes: row.user.scopes },
      rateLimit: null,
      session: row,
      bucket: `user:${row.user.id}`,
    };
  }

  return {
    authenticateSession,
    /** Forget what is cached for this token (this replica's logout takes effect at once). */
    forgetSession(token: string) {
      sessions.delete(hashApiKey(token));
    },
    async authenticate(header: string | undefined): Promise<AuthenticatedKey> {
      if (header === undefined || header.trim() === "") throw unauthorized("Missing Authorization header");
      const [scheme = "", ...rest] = header.trim().split(/\s+/);
      if (scheme.toLowerCase() !== "bearer") throw unauthorized("Authorization scheme must be Bearer");
      const key = rest.join(" ");
      if (isWellFormedSessionToken(key)) return authenticateSession(key);
      if (!isWellFormedApiKey(key)) throw unauthorized("Malformed API key");
      const hash = hashApiKey(key);
      const at = now();
      const ms = at.getTime();
      let entry = cache.get(hash);
      if (!entry || ms - entry.fetchedAt >= cacheTtlMs || ms < entry.fetchedAt) entry = await load(hash, ms);
      const { row, principal } = entry;
      if (!row || !principal || !hashesEqual(row.hash, hash)) throw unauthorized("Unknown API key");
      if (row.revokedAt) throw unauthorized("API key has been revoked");
      if (row.expiresAt && row.expiresAt.getTime() <= ms) throw unauthorized("API key has expired");
      // last_used_at is advisory: written at most once a minute per key.
      const previous = lastTouched.get(row.id) ?? 0;
      if (ms - previous > TOUCH_INTERVAL_MS) {
        lastTouched.set(row.id, ms);
        void store.touchApiKey(row.id, at).catch(() => undefined);
      }
      return { principal, rateLimit: row.rateLimit, bucket: `key:${principal.key_id}` };
    },
  };
}
export type AuthService = ReturnType<typeof createAuthService>;
