/**
 * The currently-effective predicate (spec: states table): a row is in effect
 * from valid_from (inclusive) until valid_to (exclusive; null: no expiry),
 * checked against now() since time passes without writes. Its two halves are
 * exported for statements that count each side through its own index.
 */

/** SQL: the row's validity has started. */
export const validityStartedSql = (alias: string) => `${alias}.valid_from <= now()`;
/** SQL: the row's expiry (when it has one) is still ahead. */
export const validityNotEndedSql = (alias: string) => `${alias}.valid_to > now()`;

/** SQL: the row `alias` is currently effective. */
export const effectiveSql = (alias: string) =>
  `(${validityStartedSql(alias)} AND (${alias}.valid_to IS NULL OR ${validityNotEndedSql(alias)}))`;
