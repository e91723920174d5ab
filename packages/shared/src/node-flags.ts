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

/**
 * Tracking's young generation, MB a semi-space (V8's default here is 16).
 * Tracking holds two scan batches at a time (one committing, one fetched),
 * whose data outlives many young collections and is promoted whatever the
 * young generation's size: 16 MB less of it took tracking's peak RSS under
 * ingest with 8,000-message batches from 217-243 to 174-220 MB, its share of
 * the stack's CPU unchanged within the runs' spread (docs/performance.md, session 28).
 */
export const TRACKING_SEMI_SPACE_MB = 8;

/** The flags a service's process starts with wherever it runs (the images' CMD too): all but the heap maximum. */
export function serviceImageFlags(service: string): string[] {
  const flags = ["--enable-source-maps", `--initial-old-space-size=${SERVICE_INITIAL_OLD_SPACE_MB}`];
  if (service === "tracking") flags.push(`--max-semi-space-size=${TRACKING_SEMI_SPACE_MB}`);
  return flags;
}

/** As npm start and the benchmark start `service`: its image flags and the heap maximum, less the limits NODE_OPTIONS sets itself. */
export function serviceNodeFlags(service: string, env: Record<string, string | undefined> = process.env): string[] {
  // V8 takes a flag's name with dashes or underscores alike (--max_old_space_size): compared in one spelling.
  const own = (env.NODE_OPTIONS ?? "").replaceAll("_", "-");
  const [sourceMaps, ...limits] = serviceImageFlags(service);
  return [sourceMaps!, ...[`--max-old-space-size=${SERVICE_HEAP_MB}`, ...limits].filter((flag) => !own.includes(flag.split("=")[0]!))];
}
