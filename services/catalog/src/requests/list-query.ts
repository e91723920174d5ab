/**
 * List query parameters beyond the shared QueryReader (q, sort columns), and
 * one list page with its total_count.
 */
import { containsPattern, effectiveSql, sqlOffset, validityNotEndedSql, validityStartedSql, type FieldError, type Page, type QueryReader, type SortKey } from "@whereabouts/shared";
import { Params, queryOne, type Db } from "../db/catalog-db.ts";
import { ownedTags, searchHits, type OwnerType } from "../db/sql-fragments.ts";
import type { CountCache, CountResult } from "./count-cache.ts";
import type { PageCache, RenderedPage } from "./page-cache.ts";

/** q: the shared rule (DECISIONS.md: at most 255 characters, no NUL). */
export const readQ = (reader: QueryReader): string | undefined => reader.search("q");

/** A sort field is one column or several expressions (sorted the same way). */
export function orderBy<F extends string>(keys: SortKey<F>[], columns: Record<F, string | string[]>, idColumn: string): string {
  return [...sortTerms(keys, columns).map((t) => `${t.expression} ${t.direction}`), `${idColumn} ASC`].join(", ");
}

/** The sort's expressions in order, each with its direction (the id, last, is the caller's). */
function sortTerms<F extends string>(keys: SortKey<F>[], columns: Record<F, string | string[]>) {
  return keys.flatMap((k) => [columns[k.field]].flat().map((expression) => ({ expression, direction: k.descending ? "DESC" : "ASC" })));
}

export type { FieldError };

/**
 * The conditions every record list starts with: its organization, currently
 * effective, live unless deleted ones are asked for, and the external_key
 * filter. Returns them with the organization's parameter.
 */
export function recordConditions(
  p: Params,
  alias: string,
  orgId: number,
  f: { includeDeleted: boolean; externalKeys?: string[] },
): { org: string; conds: string[] } {
  const org = p.add(orgId);
  const conds = [`${alias}.org_id = ${org}`, effectiveSql(alias)];
  if (!f.includeDeleted) conds.push(`${alias}.deleted_at IS NULL`);
  if (f.externalKeys?.length) conds.push(`${alias}.external_key = ANY(${p.add(f.externalKeys)}::text[])`);
  return { org, conds };
}

/** What a list of one kind of record is made of (assets, locations, scan points). */
export interface RecordList<F, S extends string> {
  table: string;
  alias: string;
  /** The record's view of row `alias` as JSON text (viewTextSql), and the joins it reads. */
  viewText: string;
  joins: string;
  sortColumns: Record<S, string | string[]>;
  /** The filters but `q` as ANDed conditions, the organization's and the currently-effective predicate among them. */
  where: (p: Params, orgId: number, filters: F) => string[];
  /** Lists with a `q` filter: it searches these records' name, external key, description and owned tags (searchHits). */
  searchOwner?: OwnerType;
  /** The owner type of the tags the views embed: their validity bounds how long a rendered page stays current. */
  tagOwner?: OwnerType;
  /** The count-cache key of a whole-organization list; undefined when the filters narrow it (or never cached). */
  countKey?: (orgId: number, filters: F) => string | undefined;
}

/**
 * One page of a record list and its total_count, in two statements:
 * 1. the page's ids in order, and the count unless a whole-organization list
 *    takes it from the cache: one table, so it plans in a fraction of a
 *    millisecond; with `q` the search runs once for both (a materialized CTE),
 *    not once per statement as when count and page were separate statements;
 * 2. the records of those ids (see renderIds): its shape never depends on the
 *    filter or the page, so Postgres keeps one generic plan for it. With the
 *    ids as an InitPlan of the render (one statement), the LIMIT and OFFSET
 *    parameters made every generic plan look dearer than a custom one, so
 *    Postgres planned the whole render again on every request (0.45-0.6 ms of
 *    its 1.5 ms per page of 50): one round trip more costs less.
 *
 * The two statements see two snapshots: a record written in between is shown
 * as it is after that write. Records are never removed (deletion sets
 * deleted_at), so every id of the page renders.
 *
 * A whole-organization list, or a `q` search over one, read through the
 * gateway (with its watermark) may be served from the page cache instead,
 * while the page is current (see page-cache.ts for when it is). Such a page's
 * records come from one statement, and the horizon of the records that may
 * enter or leave it with time from the count's, read first: computed no later
 * than the page's statement, it holds every boundary after that statement's
 * now(). Side by side, a boundary passing between the two was in neither (the
 * page from before it, the horizon from after) and the page was served for
 * the cache's whole age (a search test found it, a few milliseconds wide).
 */
export async function listRecords<F extends object, S extends string>(
  db: Db,
  list: RecordList<F, S>,
  orgId: number,
  filters: F,
  sort: SortKey<S>[],
  page: Page,
  caches?: { cache: CountCache; pages?: PageCache; catalogSeq: number | undefined },
): Promise<{ data: string; total: number }> {
  const { table, alias } = list;
  const p = new Params();
  const conditionList = list.where(p, orgId, filters);
  const conditions = conditionList.join(" AND ");
  const countParams = [...p.values];
  const order = orderBy(sort, list.sortColumns, `${alias}.id`);
  const limit = p.add(page.limit);
  const offset = p.add(sqlOffset(page));
  const pageIdsSql = `ARRAY(SELECT ${alias}.id FROM ${table} ${alias} WHERE ${conditions} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset})`;
  const q = "q" in filters && typeof filters.q === "string" ? filters.q : undefined;
  if (q !== undefined && !list.searchOwner) throw new Error(`${table} has no q search`);
  // A whole-organization list, or a search over one when pages are cached: the count of the
  // list comes from the cache (a search's records can enter or leave it with time only as
  // the list's do, and the tags its pattern matches: the search statement reads their horizon).
  const countKey = q === undefined || caches?.pages ? list.countKey?.(orgId, { ...filters, q: undefined }) : undefined;
  if (caches && countKey) {
    const { cache, pages, catalogSeq } = caches;
    const idsSql =
      q === undefined
        ? `SELECT ${pageIdsSql} AS ids`
        : searchedIdsAndCount(list.searchOwner!, list, conditions, p.add(containsPattern(q)), sortTerms(sort, list.sortColumns), limit, offset, p.add(orgId));
    const render = async (): Promise<RenderedPage> => {
      // The count first (see above).
      const counted = await cache.count(countKey, catalogSeq, () => countWithHorizon(db, table, alias, conditionList, countParams));
      const before = Date.now();
      const found = (await queryOne<{ ids: number[]; total?: number; seconds?: number | null }>(db, idsSql, p.values))!;
      const total = found.total ?? counted.total;
      const expiresAt = Math.min(counted.expiresAt, secondsFrom(before, found.seconds ?? null));
      if (!found.ids.length) return { data: "[]", total, expiresAt };
      const rendered = await renderPage(db, list, orgId, found.ids, pages !== undefined);
      return { data: rendered.data, total, expiresAt: Math.min(expiresAt, rendered.changesAt) };
    };
    const rendered = pages ? await pages.page(orgId, `${table} ${idsSql} ${JSON.stringify(p.values)}`, catalogSeq, render) : await render();
    return { data: rendered.data, total: rendered.total };
  }
  const idsAndCount =
    q !== undefined
      ? searchedIdsAndCount(list.searchOwner!, list, conditions, p.add(containsPattern(q)), sortTerms(sort, list.sortColumns), limit, offset)
      : `SELECT ${pageIdsSql} AS ids, (SELECT count(*)::int FROM ${table} ${alias} WHERE ${conditions}) AS total`;
  const { ids, total } = (await queryOne<{ ids: number[]; total: number }>(db, idsAndCount, p.values))!;
  if (!ids.length) return { data: "[]", total };
  const row = await queryOne<{ data: string }>(db, renderIds(list), [orgId, ids]);
  return { data: row!.data, total };
}

/** Seconds from now() to the next validity boundary (valid_from or valid_to still ahead) among `alias`'s rows; null: none. */
const secondsToNextBoundary = (alias: string) =>
  `extract(epoch FROM LEAST(min(${alias}.valid_from) FILTER (WHERE NOT ${validityStartedSql(alias)}),
                            min(${alias}.valid_to) FILTER (WHERE ${validityNotEndedSql(alias)})) - now())::float8`;

/**
 * The ids and count of a `q` list: the search runs once for both (a
 * materialized CTE), and the hits carry their sort values, so sorting them
 * reads no row a second time.
 *
 * With `horizonOrg` (the organization's parameter), also `seconds`: until the
 * next validity boundary ahead of a live, active tag whose value the pattern
 * matches, effective or not: such a tag may make its owner a hit, or stop it
 * being one, with time alone.
 */
function searchedIdsAndCount(
  owner: OwnerType,
  list: Pick<RecordList<unknown, string>, "table" | "alias">,
  conditions: string,
  pattern: string,
  terms: ReturnType<typeof sortTerms>,
  limit: string,
  offset: string,
  horizonOrg?: string,
): string {
  const { table, alias } = list;
  const select = `${alias}.id${terms.map((t, i) => `, ${t.expression} AS sort_${i}`).join("")}`;
  const horizon = horizonOrg
    ? `, (SELECT ${secondsToNextBoundary("t")}
           FROM catalog.tags t
          WHERE t.org_id = ${horizonOrg} AND t.owner_type = '${owner}' AND t.deleted_at IS NULL AND t.is_active
            AND t.value ILIKE (SELECT ${pattern}::text)) AS seconds`
    : "";
  return `WITH hits AS MATERIALIZED (${searchHits(owner, table, alias, conditions, pattern, select)})
       SELECT ARRAY(SELECT id FROM hits ORDER BY ${[...terms.map((t, i) => `sort_${i} ${t.direction}`), "id ASC"].join(", ")}
                     LIMIT ${limit} OFFSET ${offset}) AS ids,
              (SELECT count(*)::int FROM hits) AS total${horizon}`;
}

/**
 * The records of the int[] of ids $2 of the organization $1, as one JSON array
 * text `data` in the ids' order.
 */
function renderIds(list: Pick<RecordList<unknown, string>, "table" | "alias" | "viewText" | "joins">): string {
  let sql = RENDERS.get(list);
  if (sql === undefined) {
    sql = `SELECT '[' || COALESCE(string_agg(${list.viewText}, ',' ORDER BY page_ids.n), '') || ']' AS data
       FROM unnest($2::int[]) WITH ORDINALITY AS page_ids(id, n)
       JOIN ${list.table} ${list.alias} ON ${list.alias}.id = page_ids.id AND ${list.alias}.org_id = $1
       ${list.joins}`;
    RENDERS.set(list, sql);
  }
  return sql;
}

/**
 * The records of `ids` rendered; `withHorizon`: and when a tag shown on them
 * next changes validity (epoch ms, counted from before the statement, whose
 * now() is later: never after the boundary). Infinity: never.
 */
async function renderPage(
  db: Db,
  list: Pick<RecordList<unknown, string>, "table" | "alias" | "viewText" | "joins" | "tagOwner">,
  orgId: number,
  ids: number[],
  withHorizon: boolean,
): Promise<{ data: string; changesAt: number }> {
  if (!withHorizon || !list.tagOwner) {
    return { data: (await queryOne<{ data: string }>(db, renderIds(list), [orgId, ids]))!.data, changesAt: Number.POSITIVE_INFINITY };
  }
  const before = Date.now();
  const rendered = (await queryOne<{ data: string; seconds: number | null }>(db, renderIdsWithHorizon(list, list.tagOwner), [orgId, ids]))!;
  return { data: rendered.data, changesAt: secondsFrom(before, rendered.seconds) };
}

/** The instant `seconds` after `from` (epoch ms); null seconds: never. */
const secondsFrom = (from: number, seconds: number | null): number => (seconds === null ? Number.POSITIVE_INFINITY : from + seconds * 1000);

/** Each list's render statement, built once (its text keys the prepared statement). */
const RENDERS = new WeakMap<object, string>();

/**
 * renderIds, and the seconds until the next validity boundary (valid_from or
 * valid_to still ahead) of the live tags of those records: a tag shows in its
 * owner's view only while effective (the page cache's expiry, page-cache.ts).
 */
function renderIdsWithHorizon(list: Pick<RecordList<unknown, string>, "table" | "alias" | "viewText" | "joins">, tagOwner: OwnerType): string {
  let sql = RENDERS_WITH_HORIZON.get(list);
  if (sql === undefined) {
    sql = `SELECT (${renderIds(list)}) AS data,
              (SELECT ${secondsToNextBoundary("t")}
                 FROM (SELECT $1::int AS org_id, page_ids.id FROM unnest($2::int[]) AS page_ids(id)) p,
                      LATERAL ${ownedTags(tagOwner, "p")} t
                WHERE t.deleted_at IS NULL) AS seconds`;
    RENDERS_WITH_HORIZON.set(list, sql);
  }
  return sql;
}
const RENDERS_WITH_HORIZON = new WeakMap<object, string>();

/**
 * The count, and the seconds until the next validity boundary (valid_from or
 * valid_to still ahead) among the rows the other conditions select.
 */
async function countWithHorizon(db: Db, table: string, alias: string, conditions: string[], params: unknown[]): Promise<CountResult> {
  const current = effectiveSql(alias);
  const others = conditions.filter((c) => c !== current);
  const row = await queryOne<{ n: number; seconds: number | null }>(
    db,
    `SELECT count(*) FILTER (WHERE ${current})::int AS n,
            ${secondsToNextBoundary(alias)} AS seconds
       FROM ${table} ${alias} WHERE ${others.join(" AND ")}`,
    params,
  );
  return { total: row!.n, secondsValid: row!.seconds };
}
