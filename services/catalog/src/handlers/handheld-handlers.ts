/**
 * What the handheld page asks the catalog (EXTENSIONS.md section 2), through
 * the gateway's /handheld/api:
 * - `handheld.lookup`: the live tags with a scanned value (any tag type), and
 *   the asset or location whose external_key is that value;
 * - `handheld.assets`: keys and names of assets a submission recorded.
 * Only live records (not deleted) of the caller's organization.
 */
import { badRequest, sqlQuery, type RpcHandler, type Sql } from "@whereabouts/shared";
import { ok, orgOf } from "./rpc-support.ts";

export interface HandheldMatch {
  kind: "asset" | "location";
  tag_type: string | null;
  id: number;
  external_key: string;
  name: string;
  /** An asset's current location; a location's parent. */
  location_id: number | null;
  location_external_key: string | null;
}

const MAX_VALUE_LENGTH = 1000;
const MAX_ASSET_IDS = 1000;

export function handheldHandlers(deps: { db: Sql }): Record<string, RpcHandler> {
  const { db } = deps;
  return {
    "handheld.lookup": async (request) => {
      const orgId = orgOf(request);
      const value = request.query.value;
      if (!value || value.length !== 1 || value[0] === "") throw badRequest("value is required, once");
      if (value[0]!.length > MAX_VALUE_LENGTH) throw badRequest(`value is longer than ${MAX_VALUE_LENGTH} characters`);
      const matches = await sqlQuery<HandheldMatch>(
        db,
        `WITH hits AS (
           SELECT t.owner_type AS kind, t.tag_type, t.owner_id AS id, 0 AS rank
             FROM catalog.tags t
            WHERE t.org_id = $1 AND t.value = $2 AND t.deleted_at IS NULL
           UNION ALL
           SELECT 'asset', NULL, a.id, 1 FROM catalog.assets a
            WHERE a.org_id = $1 AND a.external_key = $2 AND a.deleted_at IS NULL
           UNION ALL
           SELECT 'location', NULL, l.id, 1 FROM catalog.locations l
            WHERE l.org_id = $1 AND l.external_key = $2 AND l.deleted_at IS NULL
         )
         SELECT h.kind, h.tag_type, h.id,
                COALESCE(a.external_key, l.external_key) AS external_key,
                COALESCE(a.name, l.name) AS name,
                COALESCE(p.location_id, l.parent_id) AS location_id,
                COALESCE(pl.external_key, parent.external_key) AS location_external_key
           FROM hits h
           LEFT JOIN catalog.assets a ON h.kind = 'asset' AND a.org_id = $1 AND a.id = h.id AND a.deleted_at IS NULL
           LEFT JOIN catalog.asset_positions p ON h.kind = 'asset' AND p.asset_id = h.id
           LEFT JOIN catalog.locations pl ON pl.id = p.location_id
           LEFT JOIN catalog.locations l ON h.kind = 'location' AND l.org_id = $1 AND l.id = h.id AND l.deleted_at IS NULL
           LEFT JOIN catalog.locations parent ON parent.id = l.parent_id
          WHERE a.id IS NOT NULL OR l.id IS NOT NULL
          ORDER BY h.rank, h.kind, h.id
          LIMIT 50`,
        [orgId, value[0]],
      );
      return ok({ data: { matches } });
    },
    "handheld.assets": async (request) => {
      const orgId = orgOf(request);
      const ids = (request.query.id ?? []).map(Number);
      if (ids.length > MAX_ASSET_IDS || ids.some((id) => !Number.isSafeInteger(id) || id < 1)) throw badRequest("id must be positive integers");
      if (!ids.length) return ok({ data: [] });
      const assets = await sqlQuery<{ id: number; external_key: string; name: string }>(
        db,
        `SELECT id, external_key, name FROM catalog.assets WHERE org_id = $1 AND id = ANY($2::int[]) ORDER BY id`,
        [orgId, ids],
      );
      return ok({ data: assets });
    },
  };
}
