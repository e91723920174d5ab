/**
 * Bulk upload, its jobs and the CSV export (EXTENSIONS.md section 3):
 * - `asset.bulk`: the gateway streamed the file into the object store; check
 *   the header and options, queue the job, answer 202 with its Location;
 * - `job.get`: a job of the caller's organization (404 otherwise);
 * - `asset.export`: one chunk of the filtered, sorted list as CSV lines (the
 *   gateway asks chunk after chunk and streams them out).
 */
import type { ObjectStore } from "@nats-io/obj";
import { badRequest, locationOf, notFound, operationNamed, parsePathId, type RpcHandler, type Sql } from "@whereabouts/shared";
import { exportAssets } from "../assets/asset-store.ts";
import { startBulkUpload } from "../bulk/bulk-import.ts";
import { assetToCsvLine, csvHeaderLine } from "../bulk/csv-columns.ts";
import { findJob, jobView } from "../bulk/job-store.ts";
import { readAssetQuery } from "./asset-handlers.ts";
import { ok, orgOf } from "./rpc-support.ts";

export const EXPORT_CHUNK_ROWS = 1000;
const BULK = operationNamed("catalog", "asset.bulk");

function readCursor(text: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed) || !parsed.every((v) => typeof v === "string")) throw badRequest("The export cursor is not valid");
  return parsed as string[];
}

export function bulkHandlers(deps: { db: Sql; store: () => Promise<ObjectStore>; jobQueued: () => void }): Record<string, RpcHandler> {
  const { db } = deps;
  return {
    "asset.bulk": async (request) => {
      const orgId = orgOf(request);
      const job = await startBulkUpload({ db, store: await deps.store() }, orgId, request.body);
      deps.jobQueued();
      return ok({ data: jobView(job) }, 202, { location: locationOf(BULK, { job_id: job.id }) });
    },
    "job.get": async (request) => {
      const orgId = orgOf(request);
      const id = parsePathId("job_id", request.params.job_id);
      const job = await findJob(db, orgId, id);
      if (!job) throw notFound(`Job ${id} not found`);
      return ok({ data: jobView(job) });
    },
    "asset.export": async (request) => {
      const orgId = orgOf(request);
      const { filters, sort } = readAssetQuery({ ...request, query: Object.fromEntries(Object.entries(request.query).filter(([k]) => k !== "limit" && k !== "offset")) });
      // The previous chunk's last row (its sort values), from our own earlier reply: keyset paging.
      const after = request.params.after === undefined ? undefined : readCursor(request.params.after);
      const { data, cursor, done } = await exportAssets(db, orgId, filters, sort, after, EXPORT_CHUNK_ROWS);
      const lines = (after === undefined ? csvHeaderLine() : "") + data.map((json) => assetToCsvLine(JSON.parse(json))).join("");
      return ok({ data: { csv: lines, rows: data.length, done, after: cursor ? JSON.stringify(cursor) : null } });
    },
  };
}
