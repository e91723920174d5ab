/**
 * Scan point queries: the record (location key joined at read time), the
 * list, and the writes. Every statement filters on org_id.
 */
import type { ScanPointView } from "@whereabouts/shared";
import { recordReads, type RecordState } from "../db/record-reads.ts";
import { queryOne, type Db, type Params } from "../db/catalog-db.ts";
import { softDeleteRecord, updateRecord } from "../db/record-writes.ts";
import { NOW_MS, viewJsonSql, viewTextSql, type ViewField } from "../db/sql-fragments.ts";
import { recordConditions, type RecordList } from "../requests/list-query.ts";

export const SCAN_POINT_LIVE_UNIQUE_INDEX = "scan_points_org_id_source_antenna_live_key";

const JOIN_LOCATION = `JOIN catalog.locations l ON l.id = s.location_id AND l.org_id = s.org_id`;

const FIELDS: ViewField[] = [
  ["id", "s.id", "scalar"],
  ["source", "s.source", "string"],
  ["antenna", "s.antenna", "scalar"],
  ["location_id", "l.id", "scalar"],
  ["location_external_key", "l.external_key", "string"],
  ["valid_from", "s.valid_from", "timestamp"],
  ["valid_to", "s.valid_to", "timestamp"],
  ["created_at", "s.created_at", "timestamp"],
  ["updated_at", "s.updated_at", "timestamp"],
  ["deleted_at", "s.deleted_at", "timestamp"],
];
const VIEW = viewJsonSql(FIELDS);
/** VIEW as JSON text, for what is sent on as it is. */
const VIEW_TEXT = viewTextSql(FIELDS);

export type ScanPointState = RecordState<ScanPointView>;

const reads = recordReads<ScanPointView>("catalog.scan_points", "s", { json: VIEW, text: VIEW_TEXT }, JOIN_LOCATION);
export const findScanPoint = reads.find;
export const lockScanPoint = reads.lock;
export const loadScanPoint = reads.load;

export interface NewScanPoint {
  source: string;
  antenna: number | null;
  locationId: number;
  validFrom: string | undefined;
  validTo: string | null;
}

export async function insertScanPoint(db: Db, orgId: number, input: NewScanPoint): Promise<number> {
  const row = await queryOne<{ id: number }>(
    db,
    `INSERT INTO catalog.scan_points (org_id, source, antenna, location_id, valid_from, valid_to, created_at, updated_at)
     VALUES ($1, $2, $3, $4, COALESCE($5::timestamptz, ${NOW_MS}), $6::timestamptz, ${NOW_MS}, ${NOW_MS})
     RETURNING id`,
    [orgId, input.source, input.antenna, input.locationId, input.validFrom ?? null, input.validTo],
  );
  return row!.id;
}

export interface ScanPointChanges {
  source?: string;
  antenna?: number | null;
  location_id?: number;
  valid_from?: string;
  valid_to?: string | null;
}

const CASTS: Record<keyof ScanPointChanges, string> = {
  source: "",
  antenna: "::int",
  location_id: "::int",
  valid_from: "::timestamptz",
  valid_to: "::timestamptz",
};

export const updateScanPoint = (db: Db, orgId: number, id: number, changes: ScanPointChanges) =>
  updateRecord(db, "catalog.scan_points", orgId, id, changes, CASTS);

export const softDeleteScanPoint = (db: Db, orgId: number, id: number) => softDeleteRecord(db, "catalog.scan_points", orgId, id);

/* ------------------------------------------------------------------ lists */

export const SCAN_POINT_SORT_FIELDS = ["source", "created_at", "updated_at"] as const;
export type ScanPointSortField = (typeof SCAN_POINT_SORT_FIELDS)[number];

export interface ScanPointFilters {
  sources: string[];
  antennas: number[];
  locationIds: number[];
  locationKeys: string[];
  includeDeleted: boolean;
}

const SORT_COLUMNS: Record<ScanPointSortField, string | string[]> = {
  // A source's default mapping (antenna null) first, then by antenna.
  source: ["s.source", "s.antenna IS NOT NULL", "s.antenna"],
  created_at: "s.created_at",
  updated_at: "s.updated_at",
};

function where(p: Params, orgId: number, f: ScanPointFilters): string[] {
  const { org, conds: conditions } = recordConditions(p, "s", orgId, f);
  if (f.sources.length) conditions.push(`s.source = ANY(${p.add(f.sources)}::text[])`);
  if (f.antennas.length) conditions.push(`s.antenna = ANY(${p.add(f.antennas)}::int[])`);
  if (f.locationIds.length) conditions.push(`s.location_id = ANY(${p.add(f.locationIds)}::int[])`);
  if (f.locationKeys.length) {
    conditions.push(`s.location_id IN (SELECT k.id FROM catalog.locations k
      WHERE k.org_id = ${org} AND k.external_key = ANY(${p.add(f.locationKeys)}::text[]))`);
  }
  return conditions;
}

/** GET /api/v1/scan-points as a record list (see listRecords). */
export const SCAN_POINT_LIST: RecordList<ScanPointFilters, ScanPointSortField> = {
  table: "catalog.scan_points",
  alias: "s",
  viewText: VIEW_TEXT,
  joins: JOIN_LOCATION,
  sortColumns: SORT_COLUMNS,
  where,
};
