/**
 * RPC `tracking.scan.status`: what became of a handheld submission (the
 * gateway's GET /handheld/api/scans/<event_id>). No outcome yet: pending.
 */
import { badRequest, requireOrg, type RpcHandler } from "@whereabouts/shared";
import type { Db } from "../db/tracking-db.ts";
import { findOutcome } from "../scans/scan-outcomes.ts";

export function scanStatusHandler(db: Db): RpcHandler {
  return async (request) => {
    const orgId = requireOrg(request.principal);
    const eventId = request.params.event_id;
    if (typeof eventId !== "string" || eventId === "") throw badRequest("event_id is required");
    const outcome = await findOutcome(db, orgId, eventId);
    const data = outcome
      ? {
          status: outcome.status,
          location_id: outcome.locationId,
          asset_ids: outcome.assetIds,
          unresolved_tags: outcome.unresolvedTags,
          reason: outcome.reason,
        }
      : { status: "pending", location_id: null, asset_ids: [], unresolved_tags: [], reason: null };
    return { status: 200, headers: {}, body: { data } };
  };
}
