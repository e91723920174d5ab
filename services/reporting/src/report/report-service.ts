/**
 * The asset-locations report: validate, catch up (read-your-writes), query.
 *
 * Read-your-writes (ARCHITECTURE.md rule 4): the catalog durable must have
 * applied the organization's newest catalog write the gateway knows of (the
 * envelope's `catalog_seq`; packages/shared/src/consistency.ts). Scan effects
 * (positions, last seen) are eventually visible and never waited for. The wait
 * is bounded; past it the request gets 503.
 */
import { hasSqlState, type AssetLocationList, type ConsistencyGate, type RpcRequest, requireOrg, listEnvelope } from "@whereabouts/shared";
import type { ReportingDb } from "../reporting-db.ts";
import { parseReportQuery } from "./report-query.ts";
import type { ReportStore } from "./report-store.ts";

export interface ReportServiceDeps {
  db: ReportingDb;
  store: ReportStore;
  /** The catalog durable's progress. */
  catalog: ConsistencyGate;
}

export function createReportService(deps: ReportServiceDeps) {
  return {
    async assetLocations(request: Pick<RpcRequest, "principal" | "query" | "catalog_seq">): Promise<AssetLocationList> {
      const orgId = requireOrg(request.principal);
      const query = parseReportQuery(request.query);
      await deps.catalog.reach(request.catalog_seq);
      for (let attempt = 1; ; attempt++) {
        try {
          const [data, total] = await Promise.all([
            deps.store.page(deps.db, orgId, query),
            deps.store.count(deps.db, orgId, query),
          ]);
          return listEnvelope(data, query, total);
        } catch (err) {
          // A rebuild's swap renames the tables under an exclusive lock; a read
          // caught between two renames is chosen as the deadlock victim. The
          // swap takes milliseconds: read again.
          if (attempt >= 3 || !isSwapCollision(err)) throw err;
        }
      }
    },
  };
}
export type ReportService = ReturnType<typeof createReportService>;

/** Postgres' deadlock_detected (40P01) or undefined_table (42P01), as the swap can cause. */
function isSwapCollision(err: unknown): boolean {
  return hasSqlState(err, "40P01", "42P01");
}
