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

export function serviceNodeFlags(env: Record<string, string | undefined> = process.env): string[] {
  const flags = ["--enable-source-maps"];
  if (!/--max-old-space-size/.test(env.NODE_OPTIONS ?? "")) flags.push(`--max-old-space-size=${SERVICE_HEAP_MB}`);
  return flags;
}
