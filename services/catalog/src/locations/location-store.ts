/**
 * Location queries: views (parent joined at read time), lists, writes, and the
 * tree walks — each one recursive CTE, paged in SQL, live rows only.
 */
import { type Page, sqlOffset } from "@whereabouts/shared";
import type { LocationView } from "@whereabouts/shared";
import { recordReads, type RecordState } from "../db/record-reads.ts";
import { query, queryOne, type Db, type Params } from "../db/catalog-db.ts";
import { renameRecord, softDeleteRecord, updateRecord } from "../db/record-writes.ts";
import { embeddedTags, embeddedTagsText, nameOrder, NOW_MS, viewJsonSql, viewTextSql, type ViewField } from "../db/sql-fragments.ts";
import { recordConditions, type RecordList } from "../requests/list-query.ts";

/** A location `l` with its parent `p` joined at read time (any state: the pair invariant). */
const JOIN_PARENT = `LEFT JOIN catalog.locations p ON p.id = l.parent_id AND p.org_id = l.org_id`;

const locationFields = (tags: string): ViewField[] => [
  ["id", "l.id", "scalar"],
  ["external_key", "l.external_key", "string"],
  ["name", "l.name", "string"],
  ["description", "l.description", "string"],
  ["is_active", "l.is_active", "scalar"],
  ["parent_id", "p.id", "scalar"],
  ["parent_external_key", "p.external_key", "string"],
  ["is_zone", "l.is_zone", "scalar"],
  ["max_dwell_s", "l.max_dwell_s", "scalar"],
  ["valid_from", "l.valid_from", "timestamp"],
  ["valid_to", "l.valid_to", "timestamp"],
  ["created_at", "l.created_at", "timestamp"],
  ["updated_at", "l.updated_at", "timestamp"],
  ["deleted_at", "l.deleted_at", "timestamp"],
  ["tags", tags, "json"],
];
const VIEW = viewJsonSql(locationFields(embeddedTags("location", "l")));
/** VIEW as JSON text, for what is sent on as it is. */
const VIEW_TEXT = viewTextSql(locationFields(embeddedTagsText("location", "l")));

/** Bounds every walk, so even corrupt data could not loop forever. */
const MAX_DEPTH = 100_000;

export type LocationState = RecordState<LocationView>;

const reads = recordReads<LocationView>("catalog.locations", "l", { json: VIEW, text: VIEW_TEXT }, JOIN_PARENT);
export const findLocation = reads.find;
export const lockLocation = reads.lock;
export const loadLocation = reads.load;

/** A live location by id or key, share-locked so it cannot be deleted meanwhile. */
export async function resolveParent(db: Db, orgId: number, ref: { id: number } | { key: string }): Promise<number | undefined> {
  const [column, value] = "id" in ref ? ["id", ref.id] : ["external_key", ref.key];
  const row = await queryOne<{ id: number }>(
    db,
    `SELECT id FROM catalog.locations WHERE org_id = $1 AND ${column} = $2 AND deleted_at IS NULL FOR SHARE`,
    [orgId, value],
  );
  return row?.id;
}

/** Serializes re-parenting within an organization, so two moves cannot close a cycle. */
export async function lockTree(db: Db, orgId: number): Promise<void> {
  await query(db, `SELECT 1 AS ok FROM pg_advisory_xact_lock(hashtext('catalog.location-tree'), $1::int)`, [orgId]);
}

/** True when `candidate` is `self` or lies below it (walking up from the candidate). */
export async function isSelfOrDescendant(db: Db, orgId: number, self: number, candidate: number): Promise<boolean> {
  const row = await queryOne<{ found: boolean }>(
    db,
    `WITH RECURSIVE up(id, parent_id, depth) AS (
       SELECT id, parent_id, 0 FROM catalog.locations WHERE org_id = $1 AND id = $2
       UNION ALL
       SELECT x.id, x.parent_id, u.depth + 1 FROM up u JOIN catalog.locations x ON x.org_id = $1 AND x.id = u.parent_id
        WHERE u.depth < ${MAX_DEPTH})
     SELECT EXISTS (SELECT 1 FROM up WHERE id = $3) AS found`,
    [orgId, candidate, self],
  );
  return row!.found;
}

export interface NewLocation {
  externalKey: string;
  name: string;
  description: string | null;
  isActive: boolean;
  parentId: number | null;
  isZone: boolean;
  maxDwellS: number | null;
  validFrom: string | undefined;
  validTo: string | null;
}

export async function insertLocation(db: Db, orgId: number, input: NewLocation): Promise<number> {
  const row = await queryOne<{ id: number }>(
    db,
    `INSERT INTO catalog.locations
       (org_id, external_key, name, description, is_active, parent_id, valid_from, valid_to, created_at, updated_at, is_zone, max_dwell_s)
     VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, ${NOW_MS}), $8::timestamptz, ${NOW_MS}, ${NOW_MS}, $9, $10::int)
     RETURNING id`,
    [
      orgId,
      input.externalKey,
      input.name,
      input.description,
      input.isActive,
      input.parentId,
      input.validFrom ?? null,
      input.validTo,
      input.isZone,
      input.maxDwellS,
    ],
  );
  return row!.id;
}

export interface LocationChanges {
  name?: string;
  description?: string | null;
  is_active?: boolean;
  parent_id?: number | null;
  is_zone?: boolean;
  max_dwell_s?: number | null;
  valid_from?: string;
  valid_to?: string | null;
}

const CASTS: Record<keyof LocationChanges, string> = {
  name: "",
  description: "",
  is_active: "",
  parent_id: "::int",
  is_zone: "::boolean",
  max_dwell_s: "::int",
  valid_from: "::timestamptz",
  valid_to: "::timestamptz",
};

export const updateLocation = (db: Db, orgId: number, id: number, changes: LocationChanges) =>
  updateRecord(db, "catalog.locations", orgId, id, changes, CASTS);

export const renameLocation = (db: Db, orgId: number, id: number, externalKey: string) =>
  renameRecord(db, "catalog.locations", orgId, id, externalKey);

export const softDeleteLocation = (db: Db, orgId: number, id: number) => softDeleteRecord(db, "catalog.locations", orgId, id);

export async function hasLiveChildren(db: Db, orgId: number, id: number): Promise<boolean> {
  const row = await queryOne<{ found: boolean }>(
    db,
    `SELECT EXISTS (SELECT 1 FROM catalog.locations WHERE org_id = $1 AND parent_id = $2 AND deleted_at IS NULL) AS found`,
    [orgId, id],
  );
  return row!.found;
}

/* ------------------------------------------------------------------ trees */

/** Live descendants below a location, through the parent chain. */
const SUBTREE = `sub(id, path) AS (
    SELECT c.id, ARRAY[c.id] FROM catalog.locations c
     WHERE c.org_id = $1 AND c.parent_id = $2 AND c.deleted_at IS NULL
    UNION ALL
    SELECT c.id, s.path || c.id FROM sub s
      JOIN catalog.locations c ON c.org_id = $1 AND c.parent_id = s.id AND c.deleted_at IS NULL
     WHERE cardinality(s.path) < ${MAX_DEPTH} AND NOT c.id = ANY(s.path))`;

export async function countDescendants(db: Db, orgId: number, id: number): Promise<number> {
  const row = await queryOne<{ n: number }>(db, `WITH RECURSIVE ${SUBTREE} SELECT count(*)::int AS n FROM sub`, [orgId, id]);
  return row!.n;
}

export type TreeView = "ancestors" | "children" | "descendants";

/** Each view: a CTE `rows(id, ...)` over live locations and its page order. */
const TREES: Record<TreeView, { cte: string; order: string }> = {
  ancestors: {
    cte: `WITH RECURSIVE chain(id, parent_id, depth) AS (
        SELECT l.id, l.parent_id, 0 FROM catalog.locations l WHERE l.org_id = $1 AND l.id = $2
        UNION ALL
        SELECT x.id, x.parent_id, c.depth + 1 FROM chain c
          JOIN catalog.locations x ON x.org_id = $1 AND x.id = c.parent_id AND x.deleted_at IS NULL
         WHERE c.depth < ${MAX_DEPTH}),
      rows AS (SELECT id, depth FROM chain WHERE depth > 0)`,
    // Root first: the deepest step of the walk up; id breaks ties.
    order: "r.depth DESC, r.id ASC",
  },
  children: {
    cte: `WITH rows AS (SELECT c.id, c.name FROM catalog.locations c
        WHERE c.org_id = $1 AND c.parent_id = $2 AND c.deleted_at IS NULL)`,
    order: `${nameOrder("r").map((key) => `${key} ASC`).join(", ")}, r.id ASC`,
  },
  descendants: {
    cte: `WITH RECURSIVE ${SUBTREE}, rows AS (SELECT id, path FROM sub)`,
    // Depth-first preorder: the id path sorts each parent before its subtree, siblings by id.
    order: "r.path ASC",
  },
};

export async function treePage(
  db: Db,
  orgId: number,
  id: number,
  view: TreeView,
  page: Page,
): Promise<{ data: string; total: number }> {
  const { cte, order } = TREES[view];
  const row = await queryOne<{ total: number; data: string }>(
    db,
    `${cte},
     page AS (SELECT r.* FROM rows r ORDER BY ${order} LIMIT $3 OFFSET $4)
     SELECT (SELECT count(*)::int FROM rows) AS total,
            '[' || COALESCE((SELECT string_agg(${VIEW_TEXT}, ',' ORDER BY ${order})
                               FROM page r JOIN catalog.locations l ON l.id = r.id ${JOIN_PARENT}), '') || ']' AS data`,
    [orgId, id, page.limit, sqlOffset(page)],
  );
  return { data: row!.data, total: row!.total };
}

/* ------------------------------------------------------------------ lists */

export const LOCATION_SORT_FIELDS = ["external_key", "name", "created_at"] as const;
export type LocationSortField = (typeof LOCATION_SORT_FIELDS)[number];

export interface LocationFilters {
  externalKeys: string[];
  parentIds: number[];
  parentKeys: string[];
  isActive: boolean | undefined;
  isZone: boolean | undefined;
  includeDeleted: boolean;
  q: string | undefined;
}

function where(p: Params, orgId: number, f: LocationFilters): string[] {
  const { org, conds } = recordConditions(p, "l", orgId, f);
  if (f.parentIds.length) conds.push(`l.parent_id = ANY(${p.add(f.parentIds)}::int[])`);
  if (f.parentKeys.length) {
    conds.push(`l.parent_id IN (SELECT k.id FROM catalog.locations k
      WHERE k.org_id = ${org} AND k.external_key = ANY(${p.add(f.parentKeys)}::text[]))`);
  }
  if (f.isActive !== undefined) conds.push(`l.is_active = ${p.add(f.isActive)}`);
  if (f.isZone !== undefined) conds.push(`l.is_zone = ${p.add(f.isZone)}`);
  return conds;
}

/** The cache key of a whole-organization list's count, or undefined when other filters narrow it. */
function wholeOrgCountKey(orgId: number, f: LocationFilters): string | undefined {
  if (f.externalKeys.length || f.parentIds.length || f.parentKeys.length || f.q !== undefined || f.isZone !== undefined) return undefined;
  return `location:${orgId}:${f.includeDeleted}:${f.isActive ?? "any"}`;
}

const SORT_COLUMNS: Record<LocationSortField, string | string[]> = {
  external_key: "l.external_key",
  name: nameOrder("l"),
  created_at: "l.created_at",
};

/** GET /api/v1/locations as a record list (see listRecords). */
export const LOCATION_LIST: RecordList<LocationFilters, LocationSortField> = {
  table: "catalog.locations",
  alias: "l",
  viewText: VIEW_TEXT,
  joins: JOIN_PARENT,
  sortColumns: SORT_COLUMNS,
  where,
  searchOwner: "location",
  tagOwner: "location",
  countKey: wholeOrgCountKey,
};
