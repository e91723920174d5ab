/** RPC endpoints `catalog.asset.*` (method, path, scope and schemas in the operation catalog, packages/shared contracts/operations.ts). */
import { dataEnvelopeJson, exclusivePair, locationOf, operationNamed, QueryReader, readKeyFilter, type RpcHandler, type RpcRequest } from "@whereabouts/shared";
import { ASSET_SORT_FIELDS, type AssetFilters } from "../assets/asset-store.ts";
import type { AssetService } from "../assets/asset-service.ts";
import { readQ } from "../requests/list-query.ts";
import type { TagService } from "../tags/tag-service.ts";
import { noContent, ok, orgOf, pathId } from "./rpc-support.ts";

export function readAssetQuery(request: RpcRequest) {
  const reader = new QueryReader(request.query);
  exclusivePair(reader, "location_id", "location_external_key");
  const filters: AssetFilters = {
    externalKeys: readKeyFilter(reader, "external_key"),
    locationIds: reader.ids("location_id"),
    locationKeys: readKeyFilter(reader, "location_external_key"),
    isActive: reader.bool("is_active"),
    includeDeleted: reader.bool("include_deleted") ?? false,
    q: readQ(reader),
  };
  const page = reader.page();
  const sort = reader.sort(ASSET_SORT_FIELDS, [{ field: "external_key", descending: false }]);
  reader.finish();
  return { filters, page, sort };
}

const CREATE = operationNamed("catalog", "asset.create");
const TAG_ATTACH = operationNamed("catalog", "asset.tag.attach");

export function assetHandlers(deps: {
  assets: AssetService;
  tags: TagService;
}): Record<string, RpcHandler> {
  const { assets, tags } = deps;
  return {
    "asset.list": async (request) => {
      const orgId = orgOf(request);
      const { filters, page, sort } = readAssetQuery(request);
      return ok(await assets.list(orgId, filters, sort, page, request.catalog_seq));
    },
    "asset.create": async (request) => {
      const asset = await assets.create(orgOf(request), request.body);
      return ok(dataEnvelopeJson(asset.view), 201, { location: locationOf(CREATE, { asset_id: asset.id }) });
    },
    "asset.get": async (request) => {
      const orgId = orgOf(request);
      const id = pathId(request, "asset_id");
      return ok(await assets.get(orgId, id));
    },
    "asset.update": async (request) => {
      const orgId = orgOf(request);
      const id = pathId(request, "asset_id");
      return ok({ data: await assets.update(orgId, id, request.body) });
    },
    "asset.delete": async (request) => {
      await assets.remove(orgOf(request), pathId(request, "asset_id"));
      return noContent();
    },
    "asset.rename": async (request) => {
      const orgId = orgOf(request);
      const id = pathId(request, "asset_id");
      return ok(await assets.rename(orgId, id, request.body));
    },
    "asset.tag.attach": async (request) => {
      const id = pathId(request, "asset_id");
      const tag = await tags.attach(orgOf(request), "asset", id, request.body);
      return ok({ data: tag }, 201, { location: locationOf(TAG_ATTACH, { asset_id: id, tag_id: tag.id }) });
    },
    "asset.tag.detach": async (request) => {
      await tags.detach(orgOf(request), "asset", pathId(request, "asset_id"), pathId(request, "tag_id"));
      return noContent();
    },
  };
}

