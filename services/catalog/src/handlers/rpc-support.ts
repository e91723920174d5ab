/** Small helpers shared by the catalog's RPC handlers. */
import { forbidden, parsePathId, QueryReader, type RpcReply, type RpcRequest } from "@whereabouts/shared";
import type { Page } from "../requests/list-query.ts";

/** The caller's organization; the gateway guarantees one for catalog operations. */
export function orgOf(request: RpcRequest): number {
  const orgId = request.principal.org_id;
  if (orgId === null) throw forbidden("The API key has no organization context");
  return orgId;
}

export const pathId = (request: RpcRequest, name: string) => parsePathId(name, request.params[name]);

export const ok = (body: unknown, status = 200, headers: Record<string, string> = {}): RpcReply => ({
  status,
  headers,
  body,
});

export const noContent = (): RpcReply => ({ status: 204, headers: {} });

/** A tree endpoint's query: limit and offset only; sort is refused. */
export function readTreeQuery(request: RpcRequest): Page {
  const reader = new QueryReader(request.query);
  reader.noSort();
  const page = reader.page();
  reader.finish();
  return page;
}
