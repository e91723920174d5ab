/**
 * total_count of the whole-organization lists (no key, location or q
 * filter), cached: counting every live, currently effective row of a large
 * organization costs a scan of it (13 ms at 20,000 assets), on every page.
 *
 * An entry stays exact because it expires on either of the two things that
 * can change the count:
 * - a catalog write of the organization: every read carries `catalog_seq`,
 *   the newest write the gateway knows of (packages/shared/src/consistency.ts;
 *   the list operations are `watermarked`: the gateway first reads every
 *   announcement sent before the request, a write through another gateway's too);
 *   an entry counted at a lower watermark is counted again. A write is
 *   committed before its sequence exists, so a count taken with watermark S
 *   includes every write up to S.
 * - the passage of time: a row entering or leaving its validity window. The
 *   count query also returns the seconds until the next valid_from or
 *   valid_to boundary among the rows counted (by the database's clock), and
 *   the entry expires then.
 * Without a watermark (a caller other than the gateway) nothing is cached.
 */
export interface CountResult {
  total: number;
  /** Seconds until the count could change with time alone; null: never. */
  secondsValid: number | null;
}

/** Even without a boundary in sight, recount now and then (a safety net, not a rule). */
const MAX_AGE_MS = 60_000;
const MAX_ENTRIES = 10_000;

const validMs = (result: CountResult) => (result.secondsValid === null ? MAX_AGE_MS : Math.min(MAX_AGE_MS, result.secondsValid * 1000));

export function createCountCache(now = () => Date.now()) {
  const entries = new Map<string, { total: number; seq: number; expiresAt: number }>();
  return {
    /** The count, and when it could first change by time alone (epoch ms). */
    async count(key: string, seq: number | undefined, compute: () => Promise<CountResult>): Promise<{ total: number; expiresAt: number }> {
      const at = now();
      if (seq === undefined) {
        const result = await compute();
        return { total: result.total, expiresAt: at + validMs(result) };
      }
      const entry = entries.get(key);
      if (entry && entry.seq >= seq && at < entry.expiresAt) return entry;
      const result = await compute();
      entries.delete(key);
      if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
      const counted = { total: result.total, seq, expiresAt: at + validMs(result) };
      entries.set(key, counted);
      return counted;
    },
  };
}
export type CountCache = ReturnType<typeof createCountCache>;
