/** RPC `tracking.history.list`: GET /api/v1/assets/{asset_id}/history, forwarded by the gateway. */
import { requireOrg, type RpcHandler } from "@whereabouts/shared";
import type { HistoryService } from "../history/history-service.ts";

export function historyListHandler(history: HistoryService): RpcHandler {
  return async (request) => {
    const orgId = requireOrg(request.principal);
    const body = await history.list({ orgId, params: request.params, query: request.query, catalogSeq: request.catalog_seq });
    return { status: 200, headers: {}, body };
  };
}
