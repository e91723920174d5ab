/**
 * The health probes, outside the pipeline (no key, no rate limit):
 * `/healthz` while the process lives; `/readyz` when NATS is connected and
 * every backend service answers its ping.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError, natsConnected, pingService, serviceUnavailable, SERVICES, type NatsConnection } from "@whereabouts/shared";
import { appPlugin, type GatewayRouteConfig } from "./app-plugin.ts";
import { ROUTE_METHODS } from "./http-rules.ts";

const PROBE_ALLOW = "GET, HEAD";

export interface ProbesOptions {
  nc: NatsConnection;
  /** How long /readyz waits for each service's ping. */
  readyTimeoutMs: number;
}

const json = (reply: FastifyReply, body: unknown) => reply.header("content-type", "application/json").send(Buffer.from(JSON.stringify(body)));

function probeMethods(request: FastifyRequest, reply: FastifyReply): void {
  if (request.method === "GET" || request.method === "HEAD") return;
  reply.header("allow", PROBE_ALLOW);
  throw new AppError("method_not_allowed", `Allowed methods: ${PROBE_ALLOW}`);
}

export const probesPlugin = appPlugin<ProbesOptions>("probes", async (app, { nc, readyTimeoutMs }) => {
  const config: GatewayRouteConfig = { open: true };

  app.route({
    method: ROUTE_METHODS,
    url: "/healthz",
    config,
    handler: async (request, reply) => {
      probeMethods(request, reply);
      return json(reply, { status: "ok" });
    },
  });

  app.route({
    method: ROUTE_METHODS,
    url: "/readyz",
    config,
    handler: async (request, reply) => {
      probeMethods(request, reply);
      const nats = natsConnected(nc);
      const services = nats ? await Promise.all(SERVICES.map((s) => pingService(nc, s, readyTimeoutMs))) : SERVICES.map(() => false);
      const checks: Record<string, boolean> = { nats, ...Object.fromEntries(SERVICES.map((s, i) => [s, services[i]!])) };
      if (nats && services.every(Boolean)) return json(reply, { status: "ready", checks });
      const down = Object.entries(checks).filter(([, ok]) => !ok).map(([name]) => name);
      throw serviceUnavailable(`Not ready: ${down.join(", ")} not answering`, 1);
    },
  });
});
