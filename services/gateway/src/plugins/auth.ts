/**
 * Authentication: every request but the open routes (probes, handheld)
 * presents an API key (or a session token). Its outcome is kept on the
 * request for the rate limit, which counts the request in the caller's
 * bucket (the address's when unauthenticated) before an authentication
 * error is answered.
 */
import type { FastifyRequest } from "fastify";
import type { Principal } from "@whereabouts/shared";
import type { AuthService } from "../identity/auth-service.ts";
import { appPlugin, routeConfigOf } from "./app-plugin.ts";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    /** Where the rate limit counts this request, and its limit when not the default. */
    rateBucket?: { bucket: string; limit: number | null };
    /** Authentication failed: answered after the rate limit has counted the request. */
    authError?: unknown;
  }
  interface FastifyInstance {
    /** Authenticates the request: sets `principal` and `rateBucket`, or `authError`. */
    authenticate(request: FastifyRequest): Promise<void>;
  }
}

export const authPlugin = appPlugin<{ auth: Pick<AuthService, "authenticate"> }>("auth", async (app, { auth }) => {
  app.decorateRequest("principal", undefined);
  app.decorateRequest("rateBucket", undefined);
  app.decorateRequest("authError", undefined);

  async function authenticate(request: FastifyRequest): Promise<void> {
    try {
      const authenticated = await auth.authenticate(request.headers.authorization);
      request.principal = authenticated.principal;
      request.rateBucket = { bucket: authenticated.bucket, limit: authenticated.rateLimit ?? null };
    } catch (err) {
      request.rateBucket = { bucket: `ip:${request.ip}`, limit: null };
      request.authError = err;
    }
  }
  app.decorate("authenticate", authenticate);

  app.addHook("onRequest", async (request) => {
    if (routeConfigOf(request.routeOptions.config).open) return;
    await authenticate(request);
  });
});
