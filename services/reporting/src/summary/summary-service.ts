/**
 * GET /api/v1/locations/<id>/summary: path id, no query keys, read-your-writes
 * on the organization's catalog writes (like the report), then the roll-up.
 */
import {
  notFound,
  parsePathId,
  QueryReader,
  type ConsistencyGate,
  type LocationSummaryView,
  type RpcRequest,
  requireOrg,
} from "@whereabouts/shared";
import type { ReportingDb } from "../reporting-db.ts";
import { lastSeenInSubtree, liveLocation, summaryCounts } from "./summary-store.ts";

export function createSummaryService(deps: { db: ReportingDb; catalog: ConsistencyGate }) {
  return {
    async summary(request: Pick<RpcRequest, "principal" | "query" | "params" | "catalog_seq">): Promise<LocationSummaryView> {
      const orgId = requireOrg(request.principal);
      const id = parsePathId("location_id", request.params.location_id);
      new QueryReader(request.query).finish();
      await deps.catalog.reach(request.catalog_seq);
      if (!(await liveLocation(deps.db, orgId, id))) throw notFound(`Location ${id} not found`);
      const [counts, lastSeen] = await Promise.all([summaryCounts(deps.db, orgId, id), lastSeenInSubtree(deps.db, orgId, id)]);
      return { location_id: id, ...counts, last_seen_in_subtree: lastSeen };
    },
  };
}
export type SummaryService = ReturnType<typeof createSummaryService>;
