/**
 * List query parameters beyond the shared QueryReader (q, sort columns), and
 * one list page with its total_count.
 */
import { effectiveSql, sqlOffset, validityNotEndedSql, validityStartedSql, type FieldError, type Page, type QueryReader, type SortKey } from "@whereabouts/shared";
import { query, queryOne, type Db, type Params } from "../db/catalog-db.ts";
import type { CountCache, CountResult } from "./count-cache.ts";

/** q: the shared rule (DECISIONS.md: at most 255 characters, no NUL). */
export const readQ = (reader: QueryReader): string | undefined => reader.search("q");

/** A sort field is one column or several expressions (sorted the same way). */
export function orderBy<F extends string>(keys: SortKey<F>[], columns: Record<F, string | string[]>, idColumn: string): string {
  const parts = keys.flatMap((k) => [columns[k.field]].flat().map((c) => `${c} ${k.descending ? "DESC" : "ASC"}`));
  return [...parts, `${idColumn} ASC`].join(", ");
}

export type { FieldError };

/**
 * One list page and its total_count, counted in SQL from the same filter and
 * run in parallel. `render` wraps the paged rows (alias `alias`) into the
 * statement that builds each record's JSON view (selected as text `view`).
 */
export async function listPage(
  db: Db,
  p: Params,
  options: {
    table: string;
    alias: string;
    /** ANDed; the currently-effective predicate among them. */
    conditions: string[];
    order: string;
    page: Page;
    render: (pagedRows: string) => string;
    /** Whole-organization lists: their count comes from the cache (see count-cache.ts). */
    cachedCount?: { cache: CountCache; key: string; catalogSeq: number | undefined };
  },
): Promise<{ data: string[]; total: number }> {
  const { table, alias, order, page } = options;
  const conditions = options.conditions.join(" AND ");
  const countParams = [...p.values];
  const limit = p.add(page.limit);
  const offset = p.add(sqlOffset(page));
  const paged = `(SELECT ${alias}.* FROM ${table} ${alias} WHERE ${conditions} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}) ${alias}`;
  const countAll = async () =>
    (await queryOne<{ n: number }>(db, `SELECT count(*)::int AS n FROM ${table} ${alias} WHERE ${conditions}`, countParams))!.n;
  const cached = options.cachedCount;
  const [rows, total] = await Promise.all([
    query<{ view: string }>(db, options.render(paged), p.values),
    cached ? cached.cache.count(cached.key, cached.catalogSeq, () => countWithHorizon(db, table, alias, options.conditions, countParams)) : countAll(),
  ]);
  return { data: rows.map((r) => r.view), total };
}

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
