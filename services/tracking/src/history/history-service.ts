/**
 * GET /api/v1/assets/{asset_id}/history: query rules, catch-up of the catalog
 * replica (so a just-deleted asset is 404), and the list envelope.
 */
import {
  formatMicros,
  listEnvelope,
  notFound,
  parsePathId,
  parseRfc3339,
  QueryReader,
  rfc3339Message,
  toWireTimestamp,
  type AssetHistoryItem,
  type ConsistencyGate,
  type ListEnvelope,
} from "@whereabouts/shared";
import type { TrackingClient } from "../db/tracking-db.ts";
import { liveAsset } from "../replica/replica-store.ts";
import { historyPage, type HistoryPageQuery } from "./history-store.ts";

export const HISTORY_SORT_FIELDS = ["event_observed_at"] as const;

export interface HistoryRequest {
  orgId: number;
  params: Record<string, string>;
  query: Record<string, string[]>;
  /** The catalog write the replica must have applied first (read-your-writes). */
  catalogSeq?: number | undefined;
}

/** Validates the request; throws the spec's validation_error with every problem found. */
export function parseHistoryRequest(request: HistoryRequest): HistoryPageQuery {
  const assetId = parsePathId("asset_id", request.params.asset_id);
  const q = new QueryReader(request.query);
  const bound = (name: "from" | "to"): string | undefined => {
    const raw = q.one(name);
    if (raw === undefined) return undefined;
    const instant = parseRfc3339(raw);
    if (!instant) {
      q.fail(name, "invalid_value", rfc3339Message(name));
      return undefined;
    }
    return formatMicros(instant);
  };
  const from = bound("from");
  const to = bound("to");
  const { limit, offset } = q.page();
  const [order] = q.sort(HISTORY_SORT_FIELDS, [{ field: "event_observed_at", descending: true }]);
  q.finish();
  return {
    orgId: request.orgId,
    assetId,
    ...(from !== undefined ? { from } : {}),
    ...(to !== undefined ? { to } : {}),
    descending: order?.descending ?? true,
    limit,
    offset,
  };
}

export function createHistoryService(deps: { db: TrackingClient; catalog: ConsistencyGate }) {
  const { db } = deps;
  return {
    async list(request: HistoryRequest): Promise<ListEnvelope<AssetHistoryItem>> {
      const q = parseHistoryRequest(request);
      await deps.catalog.reach(request.catalogSeq);
      if (!(await liveAsset(db, q.orgId, q.assetId))) throw notFound("Asset not found");
      const { rows, total } = await historyPage(db, q);
      return listEnvelope(
        rows.map((r) => ({
          event_observed_at: toWireTimestamp(r.observed_at),
          location_id: r.location_id,
          location_external_key: r.location_external_key,
          duration_seconds: r.duration_seconds === null ? null : Number(r.duration_seconds),
        })),
        q,
        total,
      );
    },
  };
}
export type HistoryService = ReturnType<typeof createHistoryService>;
