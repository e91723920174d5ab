/**
 * Paging (spec: list parameters): limit and offset are read by QueryReader
 * (validation.ts, `page()`); here the offset as SQL takes it and the list
 * envelope every list answers with.
 */
import { JsonText } from "../rpc.ts";
import type { ListEnvelope } from "../contracts/common.ts";

export interface Page {
  limit: number;
  offset: number;
}

/** The offset as SQL can take it (a bigint parameter): any larger value is past the end anyway. */
export const sqlOffset = (page: Page): number => Math.min(page.offset, Number.MAX_SAFE_INTEGER);

/** `{data, limit, offset, total_count}` around records. */
export const listEnvelope = <T>(data: T[], page: Page, total: number): ListEnvelope<T> => ({
  data,
  limit: page.limit,
  offset: page.offset,
  total_count: total,
});

/**
 * The list envelope around records already rendered as JSON text (by
 * Postgres): one text per record, or the whole array as one text.
 */
export function listEnvelopeJson(items: readonly string[] | string, page: Page, total: number): JsonText {
  const data = typeof items === "string" ? items : `[${items.join(",")}]`;
  return new JsonText(`{"data":${data},"limit":${page.limit},"offset":${page.offset},"total_count":${total}}`);
}
