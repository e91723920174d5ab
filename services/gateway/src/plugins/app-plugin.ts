/**
 * A plugin whose hooks, decorators and handlers apply to the whole gateway,
 * not only to routes it registers: what `fastify-plugin` does (Fastify's
 * documented `skip-override` mark), without one more dependency for it.
 */
import type { FastifyPluginAsync } from "fastify";

export function appPlugin<Options extends object>(name: string, plugin: FastifyPluginAsync<Options>): FastifyPluginAsync<Options> {
  return Object.assign(plugin, { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: name });
}

/** Per-route settings the plugins read from `routeOptions.config`. */
export interface GatewayRouteConfig {
  /**
   * The gateway's authentication and rate limit do not apply: the probes
   * (no key) and the handheld page, which authenticates and limits itself.
   */
  open?: boolean;
}

export const routeConfigOf = (config: unknown): GatewayRouteConfig => (config ?? {}) as GatewayRouteConfig;
