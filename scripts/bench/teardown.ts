/**
 * Everything the benchmark (or `npm run chaos`) starts registers how to stop it here, so a normal
 * end, an error and Ctrl-C all stop the same things, last started first.
 */
import type { ChildProcess } from "node:child_process";

type Step = { label: string; run: () => Promise<void> };

export interface Teardown {
  add(label: string, run: () => Promise<void>): void;
  /** Runs every step once, newest first; a failing step does not stop the others. */
  run(log: (message: string) => void): Promise<void>;
  /** Labels of the steps not yet finished (the one running included), newest first. */
  pending(): string[];
}

export function createTeardown(): Teardown {
  const steps: Step[] = [];
  let current: Step | undefined;
  let running: Promise<void> | undefined;
  return {
    add(label, run) {
      steps.push({ label, run });
    },
    run(log) {
      running ??= (async () => {
        while (steps.length) {
          current = steps.pop()!;
          try {
            await current.run();
          } catch (err) {
            log(`teardown: ${current.label} failed: ${(err as Error).message}`);
          }
          current = undefined;
        }
      })();
      return running;
    },
    pending() {
      return [...(current ? [current.label] : []), ...steps.map((step) => step.label).reverse()];
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

/** Sends `signal` (SIGKILL by default: a crash, no shutdown code runs); resolves once the process is gone. */
export async function killChild(child: ChildProcess, signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  await exited;
}

/**
 * Runs a script's `main` so that a normal end, an error, Ctrl-C and a crash
 * (an uncaught error, an unhandled rejection) all stop what it started, then
 * exits: with main's code, 1 on an error, 130 on a signal. `isStopping`
 * tells a long loop in main to break off.
 */
export function runWithTeardown(
  main: (scope: { teardown: Teardown; isStopping: () => boolean }) => Promise<number>,
  log: (message: string) => void,
): void {
  const teardown = createTeardown();
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      // A second signal while a step hangs (a child that ignores SIGTERM, a database that will not drop) is the
      // operator insisting: leave now, naming what may be left behind, rather than keep a stuck process alive.
      const left = teardown.pending();
      log(`${signal} again: exiting without finishing teardown${left.length ? ` (not stopped: ${left.join(", ")})` : ""}`);
      process.exit(130);
    }
    stopping = true;
    log(`${signal}: stopping what was started`);
    void teardown.run(log).finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  // A bug must not leave processes and a database behind either.
  const onCrash = (err: unknown) => {
    log(`unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    if (stopping) return;
    stopping = true;
    void teardown.run(log).finally(() => process.exit(1));
  };
  process.on("uncaughtException", onCrash);
  process.on("unhandledRejection", onCrash);
  main({ teardown, isStopping: () => stopping }).then(
    async (code) => {
      await teardown.run(log);
      process.exit(code);
    },
    async (err: unknown) => {
      log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      await teardown.run(log);
      process.exit(1);
    },
  );
}
