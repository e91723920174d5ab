/**
 * List query parameters beyond the shared QueryReader: external-key filters
 * (validated, commas rejected), paired filters (ambiguous_fields), q.
 */
import { externalKeyProblem, fieldError, type FieldError, type QueryReader, type SortKey } from "@whereabouts/shared";
import { query, queryOne, type Db, type Params } from "../db/catalog-db.ts";

export interface Page {
  limit: number;
  offset: number;
}

/** The offset as SQL can take it: any larger value is past the end anyway. */
export const sqlOffset = (page: Page) => Math.min(page.offset, Number.MAX_SAFE_INTEGER);

/** Repeatable external-key filter: every value checked, commas rejected. */
export function readKeyFilter(reader: QueryReader, name: string): string[] {
  const values = reader.many(name);
  for (const value of values) {
    if (value.includes(",")) {
      reader.fail(name, "invalid_value", `${name} must not contain commas; repeat the parameter to match several keys`);
      continue;
    }
    const problem = externalKeyProblem(name, value);
    if (problem) reader.fail(name, problem.code, problem.message, problem.params);
  }
  return values;
}

/** Filter rule 1: one fields[] entry per parameter of a pair supplied together. */
export function checkPair(reader: QueryReader, first: string, second: string): void {
  if (reader.has(first) && reader.has(second)) {
    const message = `${first} and ${second} are mutually exclusive; send only one`;
    reader.errors.push(fieldError(first, "ambiguous_fields", message), fieldError(second, "ambiguous_fields", message));
  }
}

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
 * statement that builds each record's JSON view.
 */
export async function listPage<V>(
  db: Db,
  p: Params,
  options: { table: string; alias: string; conditions: string; order: string; page: Page; render: (pagedRows: string) => string },
): Promise<{ data: V[]; total: number }> {
  const { table, alias, conditions, order, page } = options;
  const countParams = [...p.values];
  const limit = p.add(page.limit);
  const offset = p.add(sqlOffset(page));
  const paged = `(SELECT ${alias}.* FROM ${table} ${alias} WHERE ${conditions} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}) ${alias}`;
  const [rows, count] = await Promise.all([
    query<{ view: V }>(db, options.render(paged), p.values),
    queryOne<{ n: number }>(db, `SELECT count(*)::int AS n FROM ${table} ${alias} WHERE ${conditions}`, countParams),
  ]);
  return { data: rows.map((r) => r.view), total: count!.n };
}
