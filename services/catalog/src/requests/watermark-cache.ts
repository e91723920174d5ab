/**
 * The mechanism of the catalog's read caches (count-cache.ts, page-cache.ts):
 * values computed for a read at watermark `seq` (the newest catalog write the
 * gateway knows of, packages/shared/src/consistency.ts) and, where it matters,
 * a `generation` (something else that changes the value, counted by this
 * process). A value is served again while its seq covers the read's, its
 * generation is current and its own expiry (a validity boundary, or the
 * cache's maximum age) is ahead.
 *
 * Reads that arrive while the same value is being computed at their watermark
 * or a newer one wait for it instead of computing it too; it is theirs only if
 * no boundary passed while they waited. A value whose computation began later
 * (newer watermark or generation) and ended first is not replaced.
 */
export interface Expiring {
  /** When the value could first change by time alone (epoch ms). */
  expiresAt: number;
}

interface Stamp {
  seq: number;
  generation: number;
}

export function createWatermarkCache<V extends Expiring>(options: {
  now: () => number;
  /** A value is served again for this long at most. */
  maxAgeMs: number;
  /** The cache holds values of this total size at most (oldest dropped first); a larger value is not kept. */
  maxSize: number;
  sizeOf: (value: V, key: string) => number;
}) {
  const { now, maxAgeMs, maxSize, sizeOf } = options;
  const entries = new Map<string, Stamp & { value: V }>();
  const computing = new Map<string, Stamp & { value: Promise<V> }>();
  let size = 0;
  const drop = (key: string) => {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    size -= sizeOf(entry.value, key);
  };
  const covers = (held: Stamp, seq: number, generation: number) => held.seq >= seq && held.generation === generation;

  return {
    /** The value of `key` for a read at watermark `seq` (undefined: never cached) and the current `generation`. */
    async get(key: string, seq: number | undefined, generation: number, compute: () => Promise<V>): Promise<V> {
      if (seq === undefined) return compute();
      const entry = entries.get(key);
      if (entry && covers(entry, seq, generation) && now() < entry.value.expiresAt) return entry.value;
      const under = computing.get(key);
      if (under && covers(under, seq, generation)) {
        // Begun before this read arrived: good for it only if no validity boundary passed meanwhile.
        const shared = await under.value;
        if (now() < shared.expiresAt) return shared;
      }
      const mine = { seq, generation, value: compute() };
      computing.set(key, mine);
      try {
        const fresh = await mine.value;
        const held = entries.get(key);
        if (held && (held.seq > seq || held.generation > generation)) return fresh;
        drop(key);
        const kept = { ...fresh, expiresAt: Math.min(fresh.expiresAt, now() + maxAgeMs) };
        const n = sizeOf(kept, key);
        if (n <= maxSize) {
          while (size + n > maxSize) drop(entries.keys().next().value!);
          entries.set(key, { seq, generation, value: kept });
          size += n;
        }
        return fresh;
      } finally {
        if (computing.get(key) === mine) computing.delete(key);
      }
    },
  };
}
