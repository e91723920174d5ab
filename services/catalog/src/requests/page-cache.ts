/**
 * Rendered pages of the whole-organization lists (the lists whose count is
 * cached: no key or location filter) and of `q` searches over them, kept for
 * a moment: the first pages of an organization, and a search a dashboard
 * repeats, are what most reads ask for, and rendering one costs Postgres
 * some 0.6 ms for 50 records (a search 0.5 ms more), every time.
 *
 * A page is served again only while it is still what a render would give:
 * - no newer catalog write of the organization is known: the read's
 *   `catalog_seq` is at most the one the page was rendered at (as the count
 *   cache, count-cache.ts), so a client always reads its own writes;
 * - no validity boundary has passed: the page expires at the next valid_from
 *   or valid_to of the organization's records (which may enter or leave the
 *   list: the count's horizon), of the tags on the page (which show in their
 *   owners' views only while effective) and, for a search, of the tags its
 *   pattern matches (which make their owners hits only while effective);
 * - no position this process applied has moved an asset of the organization
 *   since the render began (`positionsMoved`). Positions are scan data with no
 *   read-your-writes promise (ARCHITECTURE.md rule 4); another replica's
 *   moves show once the page is MAX_AGE_MS old, well within the visibility
 *   target (p99 under 1 s from the scan).
 * Without a watermark (a caller other than the gateway) nothing is cached.
 * Reads that arrive during a render share it (watermark-cache.ts).
 */

import { createWatermarkCache } from "./watermark-cache.ts";

/** How long a page may be served again at most: bounds how late another replica's position moves show. */
export const PAGE_MAX_AGE_MS = 250;
/** Rendered text and keys kept at most (about 150 pages of 50 assets): a bound on memory, not a tuning knob. */
const MAX_BYTES = 4 * 1024 * 1024;

export interface RenderedPage {
  data: string;
  total: number;
  /** When the page could first change by time alone (epoch ms). */
  expiresAt: number;
}

export function createPageCache(options: { now?: () => number; maxAgeMs?: number; maxBytes?: number } = {}) {
  const pages = createWatermarkCache<RenderedPage>({
    now: options.now ?? (() => Date.now()),
    maxAgeMs: options.maxAgeMs ?? PAGE_MAX_AGE_MS,
    maxSize: options.maxBytes ?? MAX_BYTES,
    // The key too (a page's statement and parameters): a search that finds nothing renders "[]" under a key
    // of a kilobyte or more, and any number of distinct searches would otherwise fit in the bound.
    sizeOf: (page, key) => page.data.length + key.length,
  });
  /** Position batches applied per organization (only ever grows): a page's generation. */
  const moves = new Map<number, number>();
  return {
    /**
     * The page of `key` (organization `orgId`), rendered by `render` unless a
     * page rendered at watermark `seq` or later, since the organization's last
     * position move here, is still current.
     */
    page(orgId: number, key: string, seq: number | undefined, render: () => Promise<RenderedPage>): Promise<RenderedPage> {
      return pages.get(key, seq, moves.get(orgId) ?? 0, render);
    },
    /** This process applied position moves of these organizations (called after they committed). */
    positionsMoved(orgIds: Iterable<number>): void {
      for (const orgId of orgIds) moves.set(orgId, (moves.get(orgId) ?? 0) + 1);
    },
  };
}
export type PageCache = ReturnType<typeof createPageCache>;
