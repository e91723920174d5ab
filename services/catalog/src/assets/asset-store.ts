/** Asset queries (schema `catalog`): views rendered by Postgres, lists, writes, positions. */
import { type AssetPositionEvent, type AssetView, containsPattern, newerSql, type SortKey, statementParams, unnestColumns } from "@whereabouts/shared";
import { eventBatchParams, eventParams, recordedEvents, recordEventBatchesSql, recordEventsSql, type PendingEvent, type RecordedEventRow } from "../events/event-outbox.ts";
import { execute, Params, query, queryOne, writeStatement, type CatalogClient, type Db } from "../db/catalog-db.ts";
import { recordReads, type RecordState } from "../db/record-reads.ts";
import { renameRecord, softDeleteRecord, updateRecord } from "../db/record-writes.ts";
import { embeddedTags, embeddedTagsText, nameOrder, NOW_MS, searchMatchJoin, searchRowMatch, tagRecordText, tagViewText, viewJsonSql, viewTextSql, visibleTag, type ViewField } from "../db/sql-fragments.ts";
import type { NewTag } from "../tags/tag-store.ts";
import { orderBy, recordConditions, type RecordList } from "../requests/list-query.ts";

/** An asset row `a` with its position and location `l` joined at read time (any state: the pair invariant). */
const JOIN_LOCATION = `LEFT JOIN catalog.asset_positions ap ON ap.asset_id = a.id
  LEFT JOIN catalog.locations l ON l.id = ap.location_id AND l.org_id = a.org_id`;

/**
 * JOIN_LOCATION as a per-row lookup (OFFSET 0 keeps the planner from pulling
 * it up): for a chunk of rows picked from a large list, where the planner
 * otherwise hashes every position of the organization for a thousand rows.
 */
const JOIN_LOCATION_PER_ROW = `LEFT JOIN LATERAL (
    SELECT l.id, l.external_key FROM catalog.asset_positions ap
      JOIN catalog.locations l ON l.id = ap.location_id AND l.org_id = a.org_id
     WHERE ap.asset_id = a.id OFFSET 0) l ON true`;

/** The AssetView of row `a`, its tags and location given as SQL. */
const assetFields = (tags: string, location: { id: string; externalKey: string }): ViewField[] => [
  ["id", "a.id", "scalar"],
  ["external_key", "a.external_key", "string"],
  ["name", "a.name", "string"],
  ["description", "a.description", "string"],
  ["is_active", "a.is_active", "scalar"],
  ["metadata", "a.metadata", "json"],
  ["valid_from", "a.valid_from", "timestamp"],
  ["valid_to", "a.valid_to", "timestamp"],
  ["location_id", location.id, "scalar"],
  ["location_external_key", location.externalKey, "string"],
  ["created_at", "a.created_at", "timestamp"],
  ["updated_at", "a.updated_at", "timestamp"],
  ["deleted_at", "a.deleted_at", "timestamp"],
  ["tags", tags, "json"],
];
const AT_LOCATION = { id: "l.id", externalKey: "l.external_key" };
const VIEW = viewJsonSql(assetFields(embeddedTags("asset", "a"), AT_LOCATION));
/** VIEW as JSON text, for what is sent on as it is. */
const VIEW_TEXT = viewTextSql(assetFields(embeddedTagsText("asset", "a"), AT_LOCATION));

export type AssetState = RecordState<AssetView>;

const reads = recordReads<AssetView>("catalog.assets", "a", { json: VIEW, text: VIEW_TEXT }, JOIN_LOCATION, JOIN_LOCATION_PER_ROW);
export const findAsset = reads.find;
export const findAssets = reads.findMany;
export const lockAsset = reads.lock;
export const loadAsset = reads.load;

export interface NewAsset {
  externalKey: string;
  name: string;
  description: string | null;
  isActive: boolean;
  metadata: Record<string, unknown>;
  validFrom: string | undefined;
  validTo: string | null;
}

/** One new asset row from $1-$8 (assetRowParams); the callers add what they return. */
const INSERT_ASSET_ROW = `INSERT INTO catalog.assets
       (org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, COALESCE($7::timestamptz, ${NOW_MS}), $8::timestamptz, ${NOW_MS}, ${NOW_MS})`;

/** INSERT_ASSET_ROW's parameters. */
const assetRowParams = (orgId: number, input: NewAsset): unknown[] => [
  orgId,
  input.externalKey,
  input.name,
  input.description,
  input.isActive,
  JSON.stringify(input.metadata),
  input.validFrom ?? null,
  input.validTo,
];

const INSERT_ASSET = `${INSERT_ASSET_ROW} RETURNING id`;

export async function insertAsset(db: Db, orgId: number, input: NewAsset): Promise<number> {
  const row = await queryOne<{ id: number }>(db, INSERT_ASSET, assetRowParams(orgId, input));
  return row!.id;
}

/**
 * A new asset (POST /api/v1/assets) with its tags and its events, in one
 * statement: the asset's `created` (its view, the visible tags embedded),
 * then each tag's `attached`, in the request's order, recorded in the outbox
 * (recordEventsSql). What insertAssetRecord does in a transaction of five
 * statements, in one round trip (BEGIN, each statement and COMMIT were
 * about a third of a create's CPU in the catalog and Postgres). A unique
 * violation is the caller's to explain (insertAssetRecord names the key or tag).
 */
export async function insertAssetAtOnce(
  db: CatalogClient,
  orgId: number,
  input: NewAssetWithTags,
): Promise<{ id: number; view: string; events: PendingEvent[] }> {
  const kinds = [{ entity: "asset", verb: "created" } as const, ...input.tags.map(() => ({ entity: "tag", verb: "attached" }) as const)];
  const rows = await writeStatement<RecordedEventRow & { asset_id: number; view: string }>(
    db,
    input.tags.length ? INSERT_ASSET_AT_ONCE.withTags : INSERT_ASSET_AT_ONCE.alone,
    statementParams([
      ...assetRowParams(orgId, input),
      ...(input.tags.length ? unnestColumns(input.tags, "tagType", "value", "isActive", "validFrom", "validTo") : []),
      ...eventParams(orgId, kinds),
    ]),
  );
  return { id: rows[0]!.asset_id, view: rows[0]!.view, events: recordedEvents(rows) };
}

/** A new asset of the bulk upload, with the tags it is created with. */
export interface NewAssetWithTags extends NewAsset {
  tags: NewTag[];
}

/** The AssetView of a row just inserted: no position yet, its tags (`views`, text) the visible ones. */
const NEW_ASSET_VIEW_TEXT = viewTextSql(assetFields(`'[' || COALESCE(owned.views, '') || ']'`, { id: "NULL::int", externalKey: "NULL::text" }));

/**
 * insertAssetAtOnce's statement (a new asset's view: NEW_ASSET_VIEW_TEXT).
 * Without tags it never names catalog.tags: an asset alone takes no lock there.
 */
function insertAssetAtOnceSql(withTags: boolean): string {
  const tags = withTags
    ? `, t AS (
     INSERT INTO catalog.tags AS t
       (org_id, owner_type, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at, updated_at)
     SELECT $1, 'asset', a.id, g.tag_type, g.value, g.is_active, COALESCE(g.valid_from::timestamptz, ${NOW_MS}), g.valid_to::timestamptz, ${NOW_MS}, ${NOW_MS}
       FROM a CROSS JOIN unnest($9::text[], $10::text[], $11::boolean[], $12::text[], $13::text[]) WITH ORDINALITY
         AS g(tag_type, value, is_active, valid_from, valid_to, ord)
      ORDER BY g.ord
     RETURNING t.*
   ), owned AS (
     SELECT string_agg(${tagViewText("t")}, ',' ORDER BY t.id) FILTER (WHERE ${visibleTag("t")}) AS views FROM t
   )`
    : `, owned AS (SELECT NULL::text AS views)`;
  const [first, deadline] = withTags ? [14, 17] : [9, 12];
  return `WITH a AS (
     ${INSERT_ASSET_ROW}
     RETURNING *
   )${tags}, events AS (
     SELECT 1::bigint AS n, 'asset' AS entity, a.id AS entity_id, a.version, 'created' AS verb, ${NEW_ASSET_VIEW_TEXT} AS data
       FROM a CROSS JOIN owned${
         withTags
           ? `
     UNION ALL
     SELECT 1 + row_number() OVER (ORDER BY t.id), 'tag', t.id, t.version, 'attached', ${tagRecordText("t")} FROM t`
           : ""
       }
   ), ${recordEventsSql("events", { orgId: "$1", first })}
   SELECT r.*, e.entity_id AS asset_id, e.data AS view
     FROM recorded r CROSS JOIN (SELECT entity_id, data FROM events WHERE n = 1) e
    WHERE catalog.within_deadline($${deadline})`;
}
const INSERT_ASSET_AT_ONCE = { withTags: insertAssetAtOnceSql(true), alone: insertAssetAtOnceSql(false) };

/**
 * A chunk of new assets as insertAssetsWithTags' parameters, array literals
 * and all: built ahead, while the database still writes the chunk before.
 */
export interface AssetInsertBatch {
  readonly size: number;
  readonly params: unknown[];
}

/**
 * Many new assets and their tags in one statement (the bulk upload), with
 * their events recorded in the outbox by the same statement: each asset's
 * `created` (its view), then each of its tags' `attached` (its record), by
 * tag id, assets in input order (their ids follow it: assigned in the
 * insert's ORDER BY). The views are rendered from the rows just inserted
 * (RETURNING), as JSON text (recordEventBatchesSql). A new asset has no
 * position; its embedded tags are the visible ones, as embeddedTags picks them.
 */
export async function insertAssetsWithTags(db: Db, batch: AssetInsertBatch): Promise<void> {
  if (batch.size) await execute(db, INSERT_ASSETS_WITH_TAGS, batch.params);
}

const INSERT_ASSETS_WITH_TAGS = `WITH a AS (
     INSERT INTO catalog.assets
       (org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at)
     SELECT $1, r.external_key, r.name, r.description, r.is_active, r.metadata::jsonb,
            COALESCE(r.valid_from::timestamptz, ${NOW_MS}), r.valid_to::timestamptz, ${NOW_MS}, ${NOW_MS}
       FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY
         AS r(external_key, name, description, is_active, metadata, valid_from, valid_to, ord)
      ORDER BY r.ord
     RETURNING *
   ), t AS (
     INSERT INTO catalog.tags AS t
       (org_id, owner_type, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at, updated_at)
     SELECT $1, 'asset', a.id, g.tag_type, g.value, g.is_active, COALESCE(g.valid_from::timestamptz, ${NOW_MS}), g.valid_to::timestamptz, ${NOW_MS}, ${NOW_MS}
       FROM unnest($9::text[], $10::text[], $11::text[], $12::boolean[], $13::text[], $14::text[]) WITH ORDINALITY
         AS g(asset_key, tag_type, value, is_active, valid_from, valid_to, ord)
       JOIN a ON a.external_key = g.asset_key
      ORDER BY g.ord
     RETURNING t.*
   ), owned AS (
     SELECT t.owner_id, string_agg(${tagViewText("t")}, ',' ORDER BY t.id) FILTER (WHERE ${visibleTag("t")}) AS views
       FROM t GROUP BY t.owner_id
   ), events AS (
     SELECT row_number() OVER (ORDER BY asset_id, entity, entity_id) AS n, entity, entity_id, version, verb, data FROM (
       SELECT 'asset' AS entity, a.id AS entity_id, a.version, 'created' AS verb, a.id AS asset_id, ${NEW_ASSET_VIEW_TEXT} AS data
         FROM a LEFT JOIN owned ON owned.owner_id = a.id
       UNION ALL
       SELECT 'tag', t.id, t.version, 'attached', t.owner_id, ${tagRecordText("t")} FROM t
     ) e
   ), ${recordEventBatchesSql("events", { orgId: "$1", first: 15 })}
   SELECT count(*) FROM recorded`;

export function assetInsertBatch(orgId: number, inputs: NewAssetWithTags[]): AssetInsertBatch {
  const tags = inputs.flatMap((input) => input.tags.map((tag) => ({ ...tag, assetKey: input.externalKey })));
  return {
    size: inputs.length,
    params: statementParams([
      orgId,
      ...unnestColumns(inputs, "externalKey", "name", "description", "isActive"),
      inputs.map((i) => JSON.stringify(i.metadata)),
      ...unnestColumns(inputs, "validFrom", "validTo"),
      ...unnestColumns(tags, "assetKey", "tagType", "value", "isActive", "validFrom", "validTo"),
      ...eventBatchParams(orgId, inputs.length + tags.length),
    ]),
  };
}

export interface AssetChanges {
  name?: string;
  description?: string | null;
  is_active?: boolean;
  metadata?: Record<string, unknown>;
  valid_from?: string;
  valid_to?: string | null;
}

const CASTS: Record<keyof AssetChanges, string> = {
  name: "",
  description: "",
  is_active: "",
  metadata: "::jsonb",
  valid_from: "::timestamptz",
  valid_to: "::timestamptz",
};

/** Applies real changes: advances updated_at and the version (metadata as JSON). */
export const updateAsset = (db: Db, orgId: number, id: number, changes: AssetChanges): Promise<void> =>
  updateRecord(db, "catalog.assets", orgId, id, changes.metadata === undefined ? changes : { ...changes, metadata: JSON.stringify(changes.metadata) }, CASTS);

export const renameAsset = (db: Db, orgId: number, id: number, externalKey: string) => renameRecord(db, "catalog.assets", orgId, id, externalKey);

export const softDeleteAsset = (db: Db, orgId: number, id: number) => softDeleteRecord(db, "catalog.assets", orgId, id);

/* ------------------------------------------------------------------ lists */

export const ASSET_SORT_FIELDS = ["external_key", "name", "created_at", "updated_at"] as const;
export type AssetSortField = (typeof ASSET_SORT_FIELDS)[number];

export interface AssetFilters {
  externalKeys: string[];
  locationIds: number[];
  locationKeys: string[];
  isActive: boolean | undefined;
  includeDeleted: boolean;
  q: string | undefined;
}

function where(p: Params, orgId: number, f: AssetFilters): string[] {
  const { org, conds } = recordConditions(p, "a", orgId, f);
  if (f.locationIds.length) {
    conds.push(`a.id IN (SELECT ap.asset_id FROM catalog.asset_positions ap
      WHERE ap.org_id = ${org} AND ap.location_id = ANY(${p.add(f.locationIds)}::int[]))`);
  }
  if (f.locationKeys.length) {
    conds.push(`a.id IN (SELECT ap.asset_id FROM catalog.asset_positions ap
      WHERE ap.org_id = ${org} AND ap.location_id IN (SELECT k.id FROM catalog.locations k
        WHERE k.org_id = ${org} AND k.external_key = ANY(${p.add(f.locationKeys)}::text[])))`);
  }
  if (f.isActive !== undefined) conds.push(`a.is_active = ${p.add(f.isActive)}`);
  return conds;
}

/** The cache key of a whole-organization list's count, or undefined when other filters narrow it. */
function wholeOrgCountKey(orgId: number, f: AssetFilters): string | undefined {
  if (f.externalKeys.length || f.locationIds.length || f.locationKeys.length || f.q !== undefined) return undefined;
  return `asset:${orgId}:${f.includeDeleted}:${f.isActive ?? "any"}`;
}

const SORT_COLUMNS: Record<AssetSortField, string | string[]> = {
  external_key: "a.external_key",
  name: nameOrder("a"),
  created_at: "a.created_at",
  updated_at: "a.updated_at",
};

/** GET /api/v1/assets as a record list (see listRecords). */
export const ASSET_LIST: RecordList<AssetFilters, AssetSortField> = {
  table: "catalog.assets",
  alias: "a",
  viewText: VIEW_TEXT,
  joins: JOIN_LOCATION,
  sortColumns: SORT_COLUMNS,
  where,
  searchOwner: "asset",
  tagOwner: "asset",
  countKey: wholeOrgCountKey,
};

/** The SQL type of each sort column's values, to read a keyset cursor back. */
const SORT_TYPES: Record<AssetSortField, string> = {
  external_key: "text",
  name: "text",
  created_at: "timestamptz",
  updated_at: "timestamptz",
};

/** Rows a CSV export chunk walks at most when `q` filters it (see exportAssets). */
export const EXPORT_WALK_ROWS = 20_000;

/**
 * One chunk of the CSV export: the filtered, sorted list after `after` (the
 * sort values of the previous chunk's last row, as text), by keyset rather
 * than OFFSET, so each chunk reads only its own rows; no total count.
 * Returns the views, the cursor to go on from, and whether the list is done.
 *
 * With `q`, a chunk first walks the sort index from `after`, testing the rule
 * on each row (searchRowMatch), until `limit` matches or `walkRows` rows. The
 * set form (searchMatchJoin: every match gathered through the trigram indexes,
 * then sorted) gathers them all again for every chunk, so a broad `q` made
 * the export quadratic (100,000 matching rows took 48 s); walked, a dense
 * match reads each row about once. A walk that finds fewer than `limit`
 * matches in `walkRows` rows means a sparse `q`: that chunk is read through
 * the list's form instead, which is cheap when the matches are few.
 */
export async function exportAssets(
  db: Db,
  orgId: number,
  filters: AssetFilters,
  sort: SortKey<AssetSortField>[],
  after: string[] | undefined,
  limit: number,
  walkRows: number = EXPORT_WALK_ROWS,
): Promise<{ data: string[]; cursor: string[] | undefined; done: boolean }> {
  const p = new Params();
  const conditions = where(p, orgId, { ...filters, q: undefined });
  const keys = [
    ...sort.flatMap((k) => [SORT_COLUMNS[k.field]].flat().map((column) => ({ column, type: SORT_TYPES[k.field], descending: k.descending ?? false }))),
    { column: "a.id", type: "int", descending: false },
  ];
  if (after) {
    if (after.length !== keys.length) throw new Error("export cursor does not match the sort");
    const values = keys.map((k, i) => `${p.add(after[i])}::${k.type}`);
    if (keys.every((k) => !k.descending)) {
      // One direction: a row comparison, which the (org_id, key..., id) indexes serve as a range.
      conditions.push(`(${keys.map((k) => k.column).join(", ")}) > (${values.join(", ")})`);
    } else {
      // Mixed directions: the first key bounds the range (index-usable), the rest break its ties.
      const [first] = keys;
      conditions.push(`${first!.column} ${first!.descending ? "<=" : ">="} ${values[0]}`);
      const past = keys.map((k, i) => [...keys.slice(0, i).map((e, j) => `${e.column} = ${values[j]}`), `${k.column} ${k.descending ? "<" : ">"} ${values[i]}`].join(" AND "));
      conditions.push(`(${past.map((c) => `(${c})`).join(" OR ")})`);
    }
  }
  const order = orderBy(sort, SORT_COLUMNS, "a.id");
  const cursorOf = `ARRAY[${keys.map((k) => `${k.column}::text`).join(", ")}]`;
  /** The list's rows in order (and any extra condition), from `after`. */
  const rowsFrom = (extra?: string) => `FROM catalog.assets a WHERE ${[...conditions, ...(extra ? [extra] : [])].join(" AND ")} ORDER BY ${order}`;
  const rowsFromParams = [...p.values];
  const page = async (params: Params, chosen: string) => {
    const rows = await query<{ view: string; cursor: string[] }>(
      db,
      `SELECT ${VIEW_TEXT} AS view, ${cursorOf} AS cursor
         FROM (${chosen}) a
         ${JOIN_LOCATION_PER_ROW}
        ORDER BY ${order}`,
      params.values,
    );
    return { data: rows.map((r) => r.view), cursor: rows.at(-1)?.cursor, done: rows.length < limit };
  };
  if (filters.q === undefined) return page(p, `SELECT a.* ${rowsFrom()} LIMIT ${p.add(limit)}`);

  const pattern = containsPattern(filters.q);
  const walk = new Params(rowsFromParams);
  // Read lazily: the outer LIMIT stops the walk at the limit-th match.
  const walked = await page(
    walk,
    `SELECT a.* FROM (SELECT a.* ${rowsFrom()} LIMIT ${walk.add(walkRows)}) a
      WHERE ${searchRowMatch("asset", "a", walk.add(orgId), walk.add(pattern))}
      ORDER BY ${order} LIMIT ${walk.add(limit)}`,
  );
  if (!walked.done) return walked;
  // Fewer matches than the limit: the walk read what it could. If that was the whole rest of the list, it is done.
  const tail = new Params(rowsFromParams);
  const more = await queryOne<{ more: boolean }>(db, `SELECT true AS more ${rowsFrom()} OFFSET ${tail.add(walkRows)} LIMIT 1`, tail.values);
  if (!more) return walked;
  // Sparse: this chunk through the set form (every match gathered, then sorted).
  const sparse = new Params(rowsFromParams);
  const match = searchMatchJoin("asset", "a", sparse.add(orgId), sparse.add(pattern));
  return page(sparse, `SELECT a.* ${rowsFrom(match)} LIMIT ${sparse.add(limit)}`);
}

/** Live assets placed directly at a location (blocks its delete). */
export async function hasPlacedAssets(db: Db, orgId: number, locationId: number): Promise<boolean> {
  const row = await queryOne<{ found: boolean }>(
    db,
    `SELECT EXISTS (SELECT 1 FROM catalog.asset_positions ap JOIN catalog.assets a ON a.id = ap.asset_id
                     WHERE ap.org_id = $1 AND ap.location_id = $2 AND a.deleted_at IS NULL) AS found`,
    [orgId, locationId],
  );
  return row!.found;
}

/* -------------------------------------------------------------- positions */

/**
 * Scan data from tracking, one statement per batch: each asset takes the
 * newest of its events (observed_at, then seq), and only when that is newer
 * than the position it holds. Not a catalog change: neither updated_at nor the
 * version moves, and no event is emitted. Events for assets this organization
 * does not hold are ignored: each asset is looked up by its key (a scalar
 * subquery; as a join, a batch of 450 moves hashed all 20,000 assets).
 */
export async function applyPositions(db: Db, events: AssetPositionEvent[]): Promise<void> {
  if (!events.length) return;
  await execute(
    db,
    `INSERT INTO catalog.asset_positions AS p (asset_id, org_id, location_id, observed_at, seq)
     SELECT n.asset_id, n.org_id, n.location_id, n.observed_at, n.seq
       FROM (SELECT DISTINCT ON (org_id, asset_id) org_id, asset_id, location_id, observed_at, seq
               FROM unnest($1::int[], $2::int[], $3::int[], $4::timestamptz[], $5::bigint[])
                    AS e(org_id, asset_id, location_id, observed_at, seq)
              ORDER BY org_id, asset_id, observed_at DESC, seq DESC) n
      WHERE (SELECT a.org_id FROM catalog.assets a WHERE a.id = n.asset_id) = n.org_id
      ORDER BY n.asset_id
     ON CONFLICT (asset_id) DO UPDATE
        SET location_id = excluded.location_id, observed_at = excluded.observed_at, seq = excluded.seq
      WHERE ${newerSql({ at: "p.observed_at", seq: "p.seq" }, { at: "excluded.observed_at", seq: "excluded.seq" })}`,
    unnestColumns(events, "org_id", "asset_id", "location_id", "observed_at", "seq"),
  );
}
