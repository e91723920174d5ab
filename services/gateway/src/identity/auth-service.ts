/** Authenticates a request's Authorization header into a principal. */
import { unauthorized, type Principal } from "@whereabouts/shared";
import { hashApiKey, hashesEqual, isWellFormedApiKey } from "./api-key.ts";
import type { IdentityStore } from "./identity-store.ts";

export interface AuthenticatedKey {
  principal: Principal;
  /** The key's own limit per window, when it overrides the default. */
  rateLimit: number | null;
}

const TOUCH_INTERVAL_MS = 60_000;

export function createAuthService(store: Pick<IdentityStore, "findApiKeyByHash" | "touchApiKey">, now = () => new Date()) {
  const lastTouched = new Map<number, number>();

  return {
    async authenticate(header: string | undefined): Promise<AuthenticatedKey> {
      if (header === undefined || header.trim() === "") throw unauthorized("Missing Authorization header");
      const [scheme = "", ...rest] = header.trim().split(/\s+/);
      if (scheme.toLowerCase() !== "bearer") throw unauthorized("Authorization scheme must be Bearer");
      const key = rest.join(" ");
      if (!isWellFormedApiKey(key)) throw unauthorized("Malformed API key");
      const hash = hashApiKey(key);
      const row = await store.findApiKeyByHash(hash);
      if (!row || !hashesEqual(row.hash, hash)) throw unauthorized("Unknown API key");
      const at = now();
      if (row.revokedAt) throw unauthorized("API key has been revoked");
      if (row.expiresAt && row.expiresAt.getTime() <= at.getTime()) throw unauthorized("API key has expired");
      // last_used_at is advisory: written at most once a minute per key.
      const previous = lastTouched.get(row.id) ?? 0;
      if (at.getTime() - previous > TOUCH_INTERVAL_MS) {
        lastTouched.set(row.id, at.getTime());
        void store.touchApiKey(row.id, at).catch(() => undefined);
      }
      return {
        principal: { key_id: row.id, org_id: row.orgId, scopes: row.scopes },
        rateLimit: row.rateLimit,
      };
    },
  };
}
export type AuthService = ReturnType<typeof createAuthService>;
