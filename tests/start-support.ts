/**
 * Running the project's scripts as an operator does (`npm start`, the admin
 * CLI, reset-streams) in child processes, with databases of their own.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { DEFAULT_DATABASE_URL, dropDatabase, ensureDatabase, repoRoot } from "@whereabouts/shared";
import { eventually, within } from "@whereabouts/shared/testing";

export interface Run {
  child: ChildProcess;
  output(): string;
  exit: Promise<{ code: number | null; signal: string | null }>;
}

/** Variables of the machine that would steer a child elsewhere; an empty value unsets one. */
const UNSET = {
  DATABASE_URL: "",
  GATEWAY_DATABASE_URL: "",
  CATALOG_DATABASE_URL: "",
  TRACKING_DATABASE_URL: "",
  REPORTING_DATABASE_URL: "",
  REDIS_URL: "",
  STREAM_PREFIX: "",
  EMBEDDED_POSTGRES: "",
  DATA_DIR: "",
  MQTT_PORT: "",
};

/** `node --import tsx <script> ...args` from the repository root, output collected. */
export function runScript(script: string, env: NodeJS.ProcessEnv, args: string[] = []): Run {
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...UNSET, ...env }).filter(([, v]) => v !== undefined && v !== ""));
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { cwd: repoRoot, env: merged, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exit };
}

/** Polls `<base>/readyz` until 200, the process exits, or the deadline passes; returns the last status. */
export async function waitReady(base: string, run: Run, timeoutMs: number): Promise<number | undefined> {
  let status: number | undefined;
  await eventually(
    async () => {
      if (run.child.exitCode !== null) return false;
      status = (await fetch(`${base}/readyz`)).status; // throws while not listening yet
      return status === 200 ? true : undefined;
    },
    timeoutMs,
    250,
  ).catch(() => undefined);
  return status;
}

/** Resolves with the exit, or rejects when the process is still running at the deadline. */
export const exitWithin = (run: Run, timeoutMs: number): Promise<{ code: number | null; signal: string | null }> =>
  within(run.exit, timeoutMs, () => `still running after ${timeoutMs} ms:\n${run.output()}`);

/** Direct children of a process (Linux /proc). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Stops a started stack, SIGKILLing what does not stop (teardown only). */
export async function stopRun(run: Run | undefined): Promise<void> {
  if (!run || run.child.exitCode !== null || run.child.signalCode !== null) return;
  run.child.kill("SIGTERM");
  await exitWithin(run, 20_000).catch(() => {
    for (const pid of childPids(run.child.pid!)) process.kill(pid, "SIGKILL");
    run.child.kill("SIGKILL");
  });
}

export interface StartupDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A database named `wa_startup_<label>_<random>` on the machine's Postgres, created empty. */
export async function startupDatabase(label: string): Promise<StartupDatabase> {
  const url = new URL(process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  url.pathname = `/wa_startup_${label}_${randomBytes(4).toString("hex")}`;
  await ensureDatabase(url.toString());
  return { url: url.toString(), drop: () => dropDatabase(url.toString()) };
}
