/**
 * The asset-locations report: validate, catch up (read-your-writes), query.
 *
 * Read-your-writes (ARCHITECTURE.md rule 4): before reading, both durables must
 * have acked (so committed) everything their stream held at the moment of the
 * request. A write the client saw acknowledged was published before its 2xx, so
 * it is in that range. The wait is bounded; past it the request gets 503.
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import { forbidden, waitForConsumer, type AssetLocationList, type ConsumerSpec, type RpcRequest } from "@whereabouts/shared";
import type { ReportingDb } from "../reporting-db.ts";
import { parseReportQuery } from "./report-query.ts";
import type { ReportStore } from "./report-store.ts";

export interface ReportServiceDeps {
  db: ReportingDb;
  store: ReportStore;
  jsm: JetStreamManager;
  consumers: ConsumerSpec[];
  catchUpTimeoutMs: number;
}

export function createReportService(deps: ReportServiceDeps) {
  const catchUp = () =>
    Promise.all(deps.consumers.map((c) => waitForConsumer(deps.jsm, c.stream, c.durable, deps.catchUpTimeoutMs)));

  return {
    catchUp,
    async assetLocations(request: Pick<RpcRequest, "principal" | "query">): Promise<AssetLocationList> {
      const orgId = request.principal.org_id;
      if (orgId === null) throw forbidden("The API key has no organization context");
      const query = parseReportQuery(request.query);
      await catchUp();
      const [data, total] = await Promise.all([
        deps.store.page(deps.db, orgId, query),
        deps.store.count(deps.db, orgId, query),
      ]);
      return { data, limit: query.limit, offset: query.offset, total_count: total };
    },
  };
}
export type ReportService = ReturnType<typeof createReportService>;
