/** RPC endpoints `catalog.scan_point.*`: /api/v1/scan-points (method, path, scope and schemas in the operation catalog, packages/shared contracts/operations.ts). */
import { exclusivePair, locationOf, operationNamed, QueryReader, readKeyFilter, SCAN_POINT_OPERATIONS, SCAN_POINT_SOURCE_PATTERN, type RpcHandler, type RpcRequest } from "@whereabouts/shared";
import type { ScanPointService } from "../scan-points/scan-point-service.ts";
import { SCAN_POINT_SORT_FIELDS, type ScanPointFilters } from "../scan-points/scan-point-store.ts";
import { noContent, ok, orgOf, pathId } from "./rpc-support.ts";

const ANTENNA = /^(0|[1-9]\d{0,9})$/;

function readScanPointQuery(request: RpcRequest) {
  const reader = new QueryReader(request.query);
  exclusivePair(reader, "location_id", "location_external_key");
  const sources = reader.many("source");
  for (const value of sources) {
    if (!SCAN_POINT_SOURCE_PATTERN.test(value) || value.length > 255) {
      reader.fail("source", "invalid_value", "source may contain only ASCII letters, digits, '-' and '_' (1 to 255)");
    }
  }
  const antennas: number[] = [];
  for (const value of reader.many("antenna")) {
    if (!ANTENNA.test(value) || Number(value) > 2147483647) reader.fail("antenna", "invalid_value", "antenna must be an integer from 0 to 2147483647");
    else antennas.push(Number(value));
  }
  const filters: ScanPointFilters = {
    sources,
    antennas,
    locationIds: reader.ids("location_id"),
    locationKeys: readKeyFilter(reader, "location_external_key"),
    includeDeleted: reader.bool("include_deleted") ?? false,
  };
  const page = reader.page();
  const sort = reader.sort(SCAN_POINT_SORT_FIELDS, [{ field: "source", descending: false }]);
  reader.finish();
  return { filters, page, sort };
}

const CREATE = operationNamed("catalog", SCAN_POINT_OPERATIONS.create);

export function scanPointHandlers(scanPoints: ScanPointService): Record<string, RpcHandler> {
  return {
    [SCAN_POINT_OPERATIONS.list]: async (request) => {
      const { filters, page, sort } = readScanPointQuery(request);
      return ok(await scanPoints.list(orgOf(request), filters, sort, page));
    },
    [SCAN_POINT_OPERATIONS.create]: async (request) => {
      const point = await scanPoints.create(orgOf(request), request.body);
      return ok({ data: point }, 201, { location: locationOf(CREATE, { scan_point_id: point.id }) });
    },
    [SCAN_POINT_OPERATIONS.get]: async (request) => ok(await scanPoints.get(orgOf(request), pathId(request, "scan_point_id"))),
    [SCAN_POINT_OPERATIONS.update]: async (request) =>
      ok({ data: await scanPoints.update(orgOf(request), pathId(request, "scan_point_id"), request.body) }),
    [SCAN_POINT_OPERATIONS.delete]: async (request) => {
      await scanPoints.remove(orgOf(request), pathId(request, "scan_point_id"));
      return noContent();
    },
  };
}
