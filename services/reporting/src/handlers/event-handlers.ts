/**
 * RPC endpoints of partner events (EXTENSIONS.md section 4): the feed
 * (`GET /api/v1/events`) and the webhooks under `/api/v1/webhooks`.
 */
import { EVENTS_OPERATIONS, locationOf, operationNamed, type RpcHandler } from "@whereabouts/shared";
import type { EventFeed } from "../events/event-feed.ts";
import type { WebhookService } from "../webhooks/webhook-service.ts";

const ok = (status: number, body: unknown, headers: Record<string, string> = {}) => ({ status, headers, body });

const CREATE = operationNamed("reporting", EVENTS_OPERATIONS.create);

export function eventHandlers(feed: EventFeed, webhooks: WebhookService): Record<string, RpcHandler> {
  return {
    [EVENTS_OPERATIONS.feed]: async (request) => ok(200, await feed.list(request)),
    [EVENTS_OPERATIONS.create]: async (request) => {
      const created = await webhooks.create(request);
      return ok(201, { data: created }, { Location: locationOf(CREATE, { webhook_id: created.id }) });
    },
    [EVENTS_OPERATIONS.list]: async (request) => ok(200, await webhooks.list(request)),
    [EVENTS_OPERATIONS.get]: async (request) => ok(200, { data: await webhooks.get(request) }),
    [EVENTS_OPERATIONS.update]: async (request) => ok(200, { data: await webhooks.update(request) }),
    [EVENTS_OPERATIONS.delete]: async (request) => {
      await webhooks.delete(request);
      return { status: 204, headers: {}, body: undefined };
    },
    [EVENTS_OPERATIONS.deliveries]: async (request) => ok(200, await webhooks.deliveries(request)),
    [EVENTS_OPERATIONS.replay]: async (request) => ok(202, { data: await webhooks.replay(request) }),
  };
}
