/**
 * How `npm start` (scripts/start.ts) and the benchmark's stack start each
 * service process. On a bare machine V8 sizes its heap from all of the
 * machine's memory (some 4 GB here) and collects lazily: under load the
 * services' RSS reached 300-420 MB holding garbage, where their live data is
 * a few tens of MB. The old-space limit keeps each process's RSS near its
 * needs (peaks 130-240 MB in the benchmark, the same rates). In a container,
 * the memory limit already sizes the heap; NODE_OPTIONS with its own
 * --max-old-space-size overrides this one.
 */
export const SERVICE_HEAP_MB = 160;

/**
 * Where V8 starts its old generation's collection limit, MB. From its default
 * (a few MB, then live size times a growing factor) a scan batch's data, which
 * outlives a few young collections while its statement runs, set off a full
 * mark-compact about every half second at 35 MB of heap: tracking spent a fifth
 * of its CPU collecting. From 64 MB, ingest's stack CPU fell by 5-8% (tracking
 * 20-30%, reporting 15-25%; benchmark runs alternated), peaks rising 10-20 MB.
 * NODE_OPTIONS with its own --initial-old-space-size overrides this one.
 */
export const SERVICE_INITIAL_OLD_SPACE_MB = 64;

export function serviceNodeFlags(env: Record<string, string | undefined> = process.env): string[] {
  const flags = ["--enable-source-maps"];
  const own = env.NODE_OPTIONS ?? "";
  if (!/--max-old-space-size/.test(own)) flags.push(`--max-old-space-size=${SERVICE_HEAP_MB}`);
  if (!/--initial-old-space-size/.test(own)) flags.push(`--initial-old-space-size=${SERVICE_INITIAL_OLD_SPACE_MB}`);
  return flags;
}
