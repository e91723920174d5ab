/**
 * Everything the benchmark starts registers how to stop it here, so a normal
 * end, an error and Ctrl-C all stop the same things, last started first.
 */
import type { ChildProcess } from "node:child_process";

type Step = { label: string; run: () => Promise<void> };

export interface Teardown {
  add(label: string, run: () => Promise<void>): void;
  /** Runs every step once, newest first; a failing step does not stop the others. */
  run(log: (message: string) => void): Promise<void>;
}

export function createTeardown(): Teardown {
  const steps: Step[] = [];
  let running: Promise<void> | undefined;
  return {
    add(label, run) {
      steps.push({ label, run });
    },
    run(log) {
      running ??= (async () => {
        while (steps.length) {
          const step = steps.pop()!;
          try {
            await step.run();
          } catch (err) {
            log(`teardown: ${step.label} failed: ${(err as Error).message}`);
          }
        }
      })();
      return running;
    },
  };
}

export const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(child: ChildProcess, graceMs = 8000): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => {
    if (!hasExited(child)) child.kill("SIGKILL");
  }, graceMs);
  await exited;
  clearTimeout(timer);
}
