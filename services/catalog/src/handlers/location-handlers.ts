/** RPC endpoints `catalog.location.*` (method, path, scope and schemas in the operation catalog, packages/shared contracts/operations.ts). */
import { exclusivePair, locationOf, operationNamed, QueryReader, readKeyFilter, type RpcHandler, type RpcRequest } from "@whereabouts/shared";
import { LOCATION_SORT_FIELDS, type LocationFilters, type TreeView } from "../locations/location-store.ts";
import type { LocationService } from "../locations/location-service.ts";
import { readQ } from "../requests/list-query.ts";
import type { TagService } from "../tags/tag-service.ts";
import { noContent, ok, orgOf, pathId, readTreeQuery } from "./rpc-support.ts";

function readLocationQuery(request: RpcRequest) {
  const reader = new QueryReader(request.query);
  exclusivePair(reader, "parent_id", "parent_external_key");
  const filters: LocationFilters = {
    externalKeys: readKeyFilter(reader, "external_key"),
    parentIds: reader.ids("parent_id"),
    parentKeys: readKeyFilter(reader, "parent_external_key"),
    isActive: reader.bool("is_active"),
    isZone: reader.bool("is_zone"),
    includeDeleted: reader.bool("include_deleted") ?? false,
    q: readQ(reader),
  };
  const page = reader.page();
  const sort = reader.sort(LOCATION_SORT_FIELDS, [{ field: "external_key", descending: false }]);
  reader.finish();
  return { filters, page, sort };
}

const tree =
  (locations: LocationService, view: TreeView): RpcHandler =>
  async (request) => {
    const orgId = orgOf(request);
    const id = pathId(request, "location_id");
    const page = readTreeQuery(request);
    return ok(await locations.tree(orgId, id, view, page));
  };

const CREATE = operationNamed("catalog", "location.create");
const TAG_ATTACH = operationNamed("catalog", "location.tag.attach");

export function locationHandlers(deps: {
  locations: LocationService;
  tags: TagService;
}): Record<string, RpcHandler> {
  const { locations, tags } = deps;
  return {
    "location.list": async (request) => {
      const orgId = orgOf(request);
      const { filters, page, sort } = readLocationQuery(request);
      return ok(await locations.list(orgId, filters, sort, page, request.catalog_seq));
    },
    "location.create": async (request) => {
      const location = await locations.create(orgOf(request), request.body);
      return ok({ data: location }, 201, { location: locationOf(CREATE, { location_id: location.id }) });
    },
    "location.get": async (request) => ok(await locations.get(orgOf(request), pathId(request, "location_id"))),
    "location.update": async (request) =>
      ok({ data: await locations.update(orgOf(request), pathId(request, "location_id"), request.body) }),
    "location.delete": async (request) => {
      // Placed assets block the delete as positions stand now: scan effects are
      // eventually visible (ARCHITECTURE.md rule 4), never waited for.
      await locations.remove(orgOf(request), pathId(request, "location_id"));
      return noContent();
    },
    "location.rename": async (request) =>
      ok(await locations.rename(orgOf(request), pathId(request, "location_id"), request.body)),
    "location.tag.attach": async (request) => {
      const id = pathId(request, "location_id");
      const tag = await tags.attach(orgOf(request), "location", id, request.body);
      return ok({ data: tag }, 201, { location: locationOf(TAG_ATTACH, { location_id: id, tag_id: tag.id }) });
    },
    "location.tag.detach": async (request) => {
      await tags.detach(orgOf(request), "location", pathId(request, "location_id"), pathId(request, "tag_id"));
      return noContent();
    },
    "location.ancestors": tree(locations, "ancestors"),
    "location.children": tree(locations, "children"),
    "location.descendants": tree(locations, "descendants"),
  };
}
