/**
 * The parent's handle on the load runner process: forks it once, sends it
 * one job at a time, and stops it with everything else at teardown.
 */
import { fork, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { LoadJob, LoadJobSpec, LoadReport, RunnerMessage } from "./load-runner.ts";
import { hasExited, stopChild, type Teardown } from "./teardown.ts";

export interface LoadGenerator {
  run(job: LoadJobSpec): Promise<LoadReport>;
}

const RUNNER = path.join(path.dirname(fileURLToPath(import.meta.url)), "load-runner.ts");

export function startLoadGenerator(teardown: Teardown): LoadGenerator {
  let child: ChildProcess | undefined;
  let nextId = 0;
  const waiting = new Map<number, { resolve: (r: LoadReport) => void; reject: (e: Error) => void }>();

  const ensure = (): ChildProcess => {
    if (child && !hasExited(child)) return child;
    const proc = fork(RUNNER, [], { execArgv: ["--import", "tsx"], stdio: ["ignore", 2, 2, "ipc"] });
    proc.on("message", (message: RunnerMessage) => {
      const id = message.type === "report" ? message.report.id : message.id;
      const pending = waiting.get(id);
      waiting.delete(id);
      if (message.type === "report") pending?.resolve(message.report);
      else pending?.reject(new Error(`load runner: ${message.message}`));
    });
    proc.on("exit", (code, signal) => {
      for (const pending of waiting.values()) pending.reject(new Error(`load runner exited (${signal ?? code})`));
      waiting.clear();
    });
    child = proc;
    return proc;
  };
  teardown.add("load runner", async () => {
    if (child) await stopChild(child, 2000);
  });
  // Started now, so its start-up overlaps the seeding rather than the first case.
  ensure();

  return {
    run(spec) {
      const id = ++nextId;
      const job: LoadJob = { ...spec, id };
      return new Promise<LoadReport>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        ensure().send(job);
      });
    },
  };
}
