/**
 * Newer wins: of two states of one asset, the one with the later
 * (observed_at, seq) is kept; a late or replayed event changes nothing
 * (contracts/tracking.ts, position events). Instants compare as epoch
 * microseconds (rules/instant.ts, epochMicros), Postgres' precision.
 */

export interface Observed {
  /** Epoch microseconds. */
  at: number;
  seq: number;
}

/** True when `incoming` is newer than `held` (a tie on both is not newer). */
export const isNewer = (held: Observed, incoming: Observed): boolean =>
  held.at < incoming.at || (held.at === incoming.at && held.seq < incoming.seq);

/** SQL: `incoming` (at, seq) columns are newer than the `held` ones. */
export const newerSql = (held: { at: string; seq: string }, incoming: { at: string; seq: string }) =>
  `(${held.at}, ${held.seq}) < (${incoming.at}, ${incoming.seq})`;
