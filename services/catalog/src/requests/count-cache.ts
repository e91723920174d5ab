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
 * Reads that arrive while the same count is under way (at their watermark or
 * a newer one) wait for it rather than count again: after a write, every
 * concurrent page of the organization needs the count once, not once each
 * (watermark-cache.ts).
 */
import { createWatermarkCache } from "./watermark-cache.ts";

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
  const counts = createWatermarkCache<{ total: number; expiresAt: number }>({ now, maxAgeMs: MAX_AGE_MS, maxSize: MAX_ENTRIES, sizeOf: () => 1 });
  return {
    /** The count, and when it could first change by time alone (epoch ms). */
    count(key: string, seq: number | undefined, compute: () => Promise<CountResult>): Promise<{ total: number; expiresAt: number }> {
      return counts.get(key, seq, 0, async () => {
        const at = now();
        const result = await compute();
        return { total: result.total, expiresAt: at + validMs(result) };
      });
    },
  };
}
export type CountCache = ReturnType<typeof createCountCache>;
