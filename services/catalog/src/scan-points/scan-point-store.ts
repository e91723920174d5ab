/**
 * Scan point queries: the record (location key joined at read time), the
 * list, and the writes. Every statement filters on org_id.
 */
import { effectiveSql, microsTimestampSql, type Page, wireTimestampSql } from "@whereabouts/shared";
import type { ScanPointView, SortKey } from "@whereabouts/shared";
import { Params, queryOne, type Db } from "../db/catalog-db.ts";
import { softDeleteRecord, updateRecord } from "../db/record-writes.ts";
import { NOW_MS, rowById } from "../db/sql-fragments.ts";
import { listPage, orderBy, renderByIds } from "../requests/list-query.ts";

export const SCAN_POINT_LIVE_UNIQUE_INDEX = "scan_points_org_id_source_antenna_live_key";

const JOIN_LOCATION = `JOIN catalog.locations l ON l.id = s.location_id AND l.org_id = s.org_id`;

const VIEW = `json_build_object(
  'id', s.id,
  'source', s.source,
  'antenna', s.antenna,
  'location_id', l.id,
  'location_external_key', l.external_key,
  'valid_from', ${wireTimestampSql("s.valid_from")},
  'valid_to', ${wireTimestampSql("s.valid_to")},
  'created_at', ${wireTimestampSql("s.created_at")},
  'updated_at', ${wireTimestampSql("s.updated_at")},
  'deleted_at', ${wireTimestampSql("s.deleted_at")})`;

const byId = (idParam: string, lock?: "UPDATE") => `${rowById("catalog.scan_points", idParam, lock)} s ${JOIN_LOCATION}`;

export interface ScanPointState {
  view: ScanPointView;
  version: number;
  valid_from_us: string;
  valid_to_us: string | null;
}

export async function findScanPoint(db: Db, orgId: number, id: number): Promise<string | undefined> {
  const row = await queryOne<{ view: string }>(
    db,
    `SELECT ${VIEW}::text AS view FROM ${byId("$2")} WHERE s.org_id = $1 AND s.deleted_at IS NULL`,
    [orgId, id],
  );
  return row?.view;
}

export async function lockScanPoint(db: Db, orgId: number, id: number): Promise<ScanPointState | undefined> {
  return queryOne<ScanPointState>(
    db,
    `SELECT ${VIEW} AS view, s.version, ${microsTimestampSql("s.valid_from")} AS valid_from_us, ${microsTimestampSql("s.valid_to")} AS valid_to_us
       FROM ${byId("$2", "UPDATE")} WHERE s.org_id = $1 AND s.deleted_at IS NULL`,
    [orgId, id],
  );
}

export async function loadScanPoint(db: Db, orgId: number, id: number): Promise<{ view: ScanPointView; version: number }> {
  const row = await queryOne<{ view: ScanPointView; version: number }>(
    db,
    `SELECT ${VIEW} AS view, s.version FROM ${byId("$2")} WHERE s.org_id = $1`,
    [orgId, id],
  );
  return row!;
}

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

export async function listScanPoints(
  db: Db,
  orgId: number,
  f: ScanPointFilters,
  sort: SortKey<ScanPointSortField>[],
  page: Page,
): Promise<{ data: string; total: number }> {
  const p = new Params();
  const org = p.add(orgId);
  const conditions = [`s.org_id = ${org}`, effectiveSql("s")];
  if (!f.includeDeleted) conditions.push("s.deleted_at IS NULL");
  if (f.sources.length) conditions.push(`s.source = ANY(${p.add(f.sources)}::text[])`);
  if (f.antennas.length) conditions.push(`s.antenna = ANY(${p.add(f.antennas)}::int[])`);
  if (f.locationIds.length) conditions.push(`s.location_id = ANY(${p.add(f.locationIds)}::int[])`);
  if (f.locationKeys.length) {
    conditions.push(`s.location_id IN (SELECT k.id FROM catalog.locations k
      WHERE k.org_id = ${org} AND k.external_key = ANY(${p.add(f.locationKeys)}::text[]))`);
  }
  const order = orderBy(sort, SORT_COLUMNS, "s.id");
  return listPage(db, p, {
    orgId,
    table: "catalog.scan_points",
    alias: "s",
    conditions,
    order,
    page,
    searched: false,
    renderIds: renderByIds("catalog.scan_points", "s", VIEW, JOIN_LOCATION),
  });
}
