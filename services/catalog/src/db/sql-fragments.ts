/**
 * SQL pieces shared by the catalog's queries: embedded tags, record views,
 * the q search (wire timestamps, the currently-effective predicate and LIKE
 * escaping are the shared rules'). Records are rendered as JSON by Postgres,
 * so pages never round-trip through row objects.
 */
import { effectiveSql, wireTimestampSql } from "@whereabouts/shared";

/** Live, active and currently effective: the tags a record embeds and q searches. */
export const visibleTag = (alias: string) => `(${alias}.deleted_at IS NULL AND ${alias}.is_active AND ${effectiveSql(alias)})`;

/** The next updated_at: now to the millisecond, and always later than before. */
export const nextUpdatedAt = (alias = "") => {
  const col = alias ? `${alias}.updated_at` : "updated_at";
  return `GREATEST(date_trunc('milliseconds', clock_timestamp()), ${col} + interval '1 millisecond')`;
};

/** created_at / default valid_from: the transaction's time to the millisecond. */
export const NOW_MS = `date_trunc('milliseconds', now())`;

/**
 * One key of a record view, in wire order: its SQL value and how it becomes
 * JSON (a number or boolean as its text, a string quoted, a timestamp in the
 * wire form, or JSON already). A view is written once as its fields and
 * rendered either way below.
 */
export type ViewField = readonly [key: string, sql: string, as: "scalar" | "string" | "timestamp" | "json"];

/** A view as a `json` value: what the service reads back as an object and what events carry. */
export const viewJsonSql = (fields: readonly ViewField[]) =>
  `json_build_object(${fields.map(([key, sql, as]) => `'${key}', ${as === "timestamp" ? wireTimestampSql(sql) : sql}`).join(", ")})`;

/**
 * The same view as compact JSON text, by concatenation: what reads send on as
 * they are (a GET, list pages, the CSV export's rows). json_build_object
 * costs about twice as much per row (it looks each value's type up again),
 * which was a fifth of a list page's time in Postgres, and pads every key
 * with spaces. Keys are the code's own (plain ASCII): never escaped here.
 */
export const viewTextSql = (fields: readonly ViewField[]) =>
  fields.map(([key, sql, as], i) => `'${i ? "," : "{"}"${key}":' || ${viewTextValue(sql, as)}`).join(" || ") + ` || '}'`;

function viewTextValue(sql: string, as: ViewField[2]): string {
  switch (as) {
    case "scalar":
    case "json":
      return `COALESCE((${sql})::text, 'null')`;
    case "string":
      return `COALESCE(to_json(${sql})::text, 'null')`;
    case "timestamp":
      return `COALESCE('"' || ${wireTimestampSql(sql)} || '"', 'null')`;
  }
}

/** The TagView keys in wire order; TagRecord extends TagView, so both shapes start with these. */
const tagViewFields = (t: string): ViewField[] => [
  ["id", `${t}.id`, "scalar"],
  ["tag_type", `${t}.tag_type`, "string"],
  ["value", `${t}.value`, "string"],
  ["is_active", `${t}.is_active`, "scalar"],
  ["valid_from", `${t}.valid_from`, "timestamp"],
  ["valid_to", `${t}.valid_to`, "timestamp"],
  ["created_at", `${t}.created_at`, "timestamp"],
  ["updated_at", `${t}.updated_at`, "timestamp"],
];

export const tagViewJson = (t: string) => viewJsonSql(tagViewFields(t));
/** tagViewJson as JSON text (see viewTextSql). */
export const tagViewText = (t: string) => viewTextSql(tagViewFields(t));

/** A tag as events carry it (TagRecord): the view plus owner and soft-delete state. */
const tagRecordFields = (t: string): ViewField[] => [
  ...tagViewFields(t),
  ["owner_type", `${t}.owner_type`, "string"],
  ["owner_id", `${t}.owner_id`, "scalar"],
  ["deleted_at", `${t}.deleted_at`, "timestamp"],
];
export const tagRecordJson = (t: string) => viewJsonSql(tagRecordFields(t));
/** tagRecordJson as JSON text (see viewTextSql). */
export const tagRecordText = (t: string) => viewTextSql(tagRecordFields(t));

export type OwnerType = "asset" | "location";

/**
 * Sort keys for "by name": the indexed 500-character prefix, then the whole
 * name (the order of the name itself in a byte-order collation). The prefix
 * length matches the name indexes of migration 20261124000000.
 */
export const nameOrder = (alias: string): string[] => [`left(${alias}.name, 500)`, `${alias}.name`];

/**
 * The embedded tags array of an owner row: active, currently effective, live;
 * by id. The owner lookup sits behind OFFSET 0 so that the only index it can
 * use is the owner index: without statistics (a never-analyzed table) the
 * planner would otherwise pick the live `(org_id, tag_type, value)` index and
 * walk every tag of the organization.
 */
export const embeddedTags = (ownerType: OwnerType, owner: string) => `COALESCE((
  SELECT json_agg(${tagViewJson("t")} ORDER BY t.id)
    FROM ${ownedTags(ownerType, owner)} t
   WHERE ${visibleTag("t")}), '[]'::json)`;

/** embeddedTags as JSON text (see viewTextSql). */
export const embeddedTagsText = (ownerType: OwnerType, owner: string) => `'[' || COALESCE((
  SELECT string_agg(${tagViewText("t")}, ',' ORDER BY t.id)
    FROM ${ownedTags(ownerType, owner)} t
   WHERE ${visibleTag("t")}), '') || ']'`;

/** The tags of row `owner` (org_id, id), one owner-index lookup whatever the statistics (OFFSET 0 keeps it a per-row subquery). */
export const ownedTags = (ownerType: OwnerType, owner: string) =>
  `(SELECT * FROM catalog.tags WHERE org_id = ${owner}.org_id AND owner_type = '${ownerType}' AND owner_id = ${owner}.id OFFSET 0)`;

/**
 * One row of `table` by primary key, whatever the statistics say: OFFSET 0
 * keeps the caller's other conditions (org, soft delete) out of the scan, so
 * the primary key is the only index that applies. `lock` locks that row.
 */
export const rowById = (table: string, idParam: string, lock?: "UPDATE" | "SHARE") =>
  `(SELECT * FROM ${table} WHERE id = ${idParam} OFFSET 0${lock ? ` FOR ${lock}` : ""})`;

export const SORT_DIRECTION = (descending: boolean) => (descending ? "DESC" : "ASC");

/** The record columns the `q` search reads (each trigram-indexed); a visible tag's value is the fourth place. */
const SEARCHED_COLUMNS = ["name", "external_key", "description"] as const;

/**
 * The ids of the rows the `q` search matches: the row's name, external key or
 * description, or one of its visible tag values (trigram-indexed columns).
 * One branch per column: each can use its own trigram index (an OR of the
 * three costs more than a sequential scan in the planner's eyes).
 */
const searchedIds = (ownerType: OwnerType, org: string, pattern: string) => {
  const table = ownerType === "asset" ? "catalog.assets" : "catalog.locations";
  const column = (name: string) => `SELECT s.id FROM ${table} s WHERE s.org_id = ${org} AND s.${name} ILIKE ${pattern}`;
  return `${SEARCHED_COLUMNS.map(column).join("\n      UNION ")}
      UNION
      SELECT t.owner_id FROM catalog.tags t
       WHERE t.org_id = ${org} AND t.owner_type = '${ownerType}' AND ${visibleTag("t")} AND t.value ILIKE ${pattern}`;
};

/**
 * The rows of `table` (as `alias`) meeting `conditions` that the `q` search
 * matches, each as `select`: one branch per searched column and one for the
 * owned visible tags' values, so that each reads its matches through its own
 * trigram index and tests the list's conditions on the row it fetched (no
 * second pass over the matches by primary key; a row matched twice selects
 * the same values, and UNION keeps it once). The pattern is an InitPlan's
 * value, which the planner cannot see into: a custom plan is no cheaper than
 * the generic one, so the statement keeps one generic plan (planned for each
 * pattern, a search spent a third of its Postgres time planning).
 */
export const searchHits = (ownerType: OwnerType, table: string, alias: string, conditions: string, pattern: string, select: string) => {
  const matches = `(SELECT ${pattern}::text)`;
  return [
    ...SEARCHED_COLUMNS.map((name) => `SELECT ${select} FROM ${table} ${alias} WHERE ${conditions} AND ${alias}.${name} ILIKE ${matches}`),
    `SELECT ${select} FROM catalog.tags t JOIN ${table} ${alias} ON ${alias}.id = t.owner_id AND ${alias}.org_id = t.org_id
      WHERE ${conditions} AND t.owner_type = '${ownerType}' AND ${visibleTag("t")} AND t.value ILIKE ${matches}`,
  ].join("\n      UNION ");
};

/**
 * The `q` search as a semi-join with the pattern in view: for a walk along a
 * sort index under a LIMIT (the CSV export's sparse chunks), where an id array
 * would be tested on every row walked.
 */
export const searchMatchJoin = (ownerType: OwnerType, alias: string, org: string, pattern: string) =>
  `${alias}.id IN (
      ${searchedIds(ownerType, org, pattern)})`;

/**
 * The same `q` rule as `searchHits`, tested on each row by itself: for a walk
 * along a sort index (the CSV export), where a broad `q` would have
 * `searchHits` gather every match again for each chunk.
 */
export const searchRowMatch = (ownerType: OwnerType, alias: string, org: string, pattern: string) =>
  // The tag test is a scalar subquery with LIMIT, never an EXISTS: an EXISTS under OR becomes a hashed
  // subplan that reads every matching tag of the organization, on each chunk.
  `(${SEARCHED_COLUMNS.map((name) => `${alias}.${name} ILIKE ${pattern}`).join(" OR ")}
    OR COALESCE((SELECT true FROM catalog.tags t
                  WHERE t.org_id = ${org} AND t.owner_type = '${ownerType}' AND t.owner_id = ${alias}.id
                    AND ${visibleTag("t")} AND t.value ILIKE ${pattern} LIMIT 1), false))`;
