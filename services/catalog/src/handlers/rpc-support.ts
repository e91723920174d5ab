/** Small helpers shared by the catalog's RPC handlers. */
import { parsePathId, QueryReader, requireOrg, type Page, type RpcReply, type RpcRequest } from "@whereabouts/shared";

/** The caller's organization; the gateway guarantees one for catalog operations. */
export function orgOf(request: RpcRequest): number {
  return requireOrg(request.principal);
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
