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
 * A whole-organization list read through the gateway (with its watermark) may
 * be served from the page cache instead, while the page is current (see
 * page-cache.ts for when it is).
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
  const countKey = list.countKey?.(orgId, filters);
  if (caches && countKey) {
    // A whole-organization list: the count comes from the cache, beside the page's ids,
    // and the rendered page may come from the page cache.
    const { cache, pages, catalogSeq } = caches;
    const render = async (): Promise<RenderedPage> => {
      const [row, counted] = await Promise.all([
        queryOne<{ ids: number[] }>(db, `SELECT ${pageIdsSql} AS ids`, p.values),
        cache.count(countKey, catalogSeq, () => countWithHorizon(db, table, alias, conditionList, countParams)),
      ]);
      const ids = row!.ids;
      if (!ids.length) return { data: "[]", ...counted };
      if (!pages || !list.tagOwner) return { data: (await queryOne<{ data: string }>(db, renderIds(list), [orgId, ids]))!.data, ...counted };
      // Taken before the statement, whose now() is later: the page expires no later than a tag's boundary.
      const before = Date.now();
      const rendered = (await queryOne<{ data: string; seconds: number | null }>(db, renderIdsWithHorizon(list, list.tagOwner), [orgId, ids]))!;
      const tagsChangeAt = rendered.seconds === null ? Number.POSITIVE_INFINITY : before + rendered.seconds * 1000;
      return { data: rendered.data, total: counted.total, expiresAt: Math.min(counted.expiresAt, tagsChangeAt) };
    };
    const rendered = pages ? await pages.page(orgId, `${table} ${pageIdsSql} ${JSON.stringify(p.values)}`, catalogSeq, render) : await render();
    return { data: rendered.data, total: rendered.total };
  }
  const q = "q" in filters && typeof filters.q === "string" ? filters.q : undefined;
  if (q !== undefined && !list.searchOwner) throw new Error(`${table} has no q search`);
  const idsAndCount =
    q !== undefined
      ? searchedIdsAndCount(list.searchOwner!, list, conditions, p.add(containsPattern(q)), sortTerms(sort, list.sortColumns), limit, offset)
      : `SELECT ${pageIdsSql} AS ids, (SELECT count(*)::int FROM ${table} ${alias} WHERE ${conditions}) AS total`;
  const { ids, total } = (await queryOne<{ ids: number[]; total: number }>(db, idsAndCount, p.values))!;
  if (!ids.length) return { data: "[]", total };
  const row = await queryOne<{ data: string }>(db, renderIds(list), [orgId, ids]);
  return { data: row!.data, total };
}

/**
 * The ids and count of a `q` list: the search runs once for both (a
 * materialized CTE), and the hits carry their sort values, so sorting them
 * reads no row a second time.
 */
function searchedIdsAndCount(
  owner: OwnerType,
  list: Pick<RecordList<unknown, string>, "table" | "alias">,
  conditions: string,
  pattern: string,
  terms: ReturnType<typeof sortTerms>,
  limit: string,
  offset: string,
): string {
  const { table, alias } = list;
  const select = `${alias}.id${terms.map((t, i) => `, ${t.expression} AS sort_${i}`).join("")}`;
  return `WITH hits AS MATERIALIZED (${searchHits(owner, table, alias, conditions, pattern, select)})
       SELECT ARRAY(SELECT id FROM hits ORDER BY ${[...terms.map((t, i) => `sort_${i} ${t.direction}`), "id ASC"].join(", ")}
                     LIMIT ${limit} OFFSET ${offset}) AS ids,
              (SELECT count(*)::int FROM hits) AS total`;
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
              (SELECT extract(epoch FROM LEAST(min(t.valid_from) FILTER (WHERE NOT ${validityStartedSql("t")}),
                                               min(t.valid_to) FILTER (WHERE ${validityNotEndedSql("t")})) - now())::float8
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
            extract(epoch FROM LEAST(min(${alias}.valid_from) FILTER (WHERE NOT ${validityStartedSql(alias)}),
                                     min(${alias}.valid_to) FILTER (WHERE ${validityNotEndedSql(alias)})) - now())::float8 AS seconds
       FROM ${table} ${alias} WHERE ${others.join(" AND ")}`,
    params,
  );
  return { total: row!.n, secondsValid: row!.seconds };
}
