/**
 * A background round run again and again: the next round is scheduled only
 * once the previous one has settled (rounds never overlap), a failed round is
 * the caller's to log and the next one retries, and `stop()` cancels the
 * pending round and waits for the one in flight (service.ts, shutdown order).
 */
import type { Worker } from "./service.ts";

export function startPeriodic(options: {
  /** Pause between the end of one round and the start of the next. */
  everyMs: number;
  /** Delay before the first round (0: at once). */
  firstAfterMs?: number;
  /** One round; `stopping()` lets a long round end early. */
  round: (stopping: () => boolean) => Promise<void>;
  onError: (err: unknown) => void;
  /** Keep the process alive for the timer (default: unref'd, shutdown decides). */
  ref?: boolean;
}): Worker {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const stopping = () => stopped;
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = options
        .round(stopping)
        .catch(options.onError)
        .finally(() => {
          running = undefined;
          schedule(options.everyMs);
        });
    }, delayMs);
    if (!options.ref) timer.unref();
  };
  schedule(options.firstAfterMs ?? 0);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
