/**
 * Where a batch's time went, phase by phase, for its debug log line:
 * `lap("parse_ms")` records the time since the previous lap (or the start).
 */
export function phaseTimer() {
  const started = performance.now();
  const timings: Record<string, number> = {};
  let mark = started;
  return {
    timings,
    lap(name: string): void {
      const now = performance.now();
      timings[name] = Math.round((now - mark) * 10) / 10;
      mark = now;
    },
    totalMs: (): number => Math.round(performance.now() - started),
  };
}
