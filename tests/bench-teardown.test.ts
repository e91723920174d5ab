/**
 * The benchmark's and chaos run's teardown (scripts/bench/teardown.ts): a
 * signal stops what was started, newest first; a second signal while a step
 * hangs exits at once, naming what was not stopped (a stuck teardown once kept
 * a benchmark process spinning after its process group was killed).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createTeardown } from "../scripts/bench/teardown.ts";

const script = fileURLToPath(new URL("./teardown-child.ts", import.meta.url));

const children: ChildProcess[] = [];
afterEach(() => {
  // A failed test must not leave its child behind (the very bug under test).
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** Starts the child (tsx); `printed(line)` resolves once its output holds `line`. */
function startChild(mode: string) {
  const child = spawn(process.execPath, ["--import", "tsx", script, mode], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  const waiters: { line: string; resolve: () => void }[] = [];
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const w of waiters.filter((w) => output.includes(w.line))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const printed = (line: string) =>
    new Promise<void>((resolve, reject) => {
      if (output.includes(line)) return resolve();
      waiters.push({ line, resolve });
      child.once("exit", () => reject(new Error(`exited before printing ${line}: ${output}`)));
    });
  return { child, printed, output: () => output };
}

describe("runWithTeardown", () => {
  it("stops what was started on SIGTERM, newest first, and exits 130", async () => {
    const { child, printed, output } = startChild("quick");
    await printed("ready");
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(130);
    expect(output()).toMatch(/SIGTERM: stopping what was started[\s\S]*stopped second[\s\S]*stopped first/);
  });

  it("exits on a second signal while a step hangs, naming the steps not finished", async () => {
    const { child, printed, output } = startChild("hang");
    await printed("ready");
    child.kill("SIGTERM");
    await printed("hanging");
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(130);
    expect(output()).toContain("SIGTERM again: exiting without finishing teardown (not stopped: stuck step, first)");
    expect(output()).not.toContain("stopped first");
  });
});

describe("createTeardown", () => {
  it("lists the pending steps, the running one first, and runs each once even when one fails", async () => {
    const teardown = createTeardown();
    const ran: string[] = [];
    const seen: string[][] = [];
    teardown.add("a", async () => void ran.push("a"));
    teardown.add("b", async () => {
      seen.push(teardown.pending());
      throw new Error("boom");
    });
    teardown.add("c", async () => void ran.push("c"));
    expect(teardown.pending()).toEqual(["c", "b", "a"]);
    const logged: string[] = [];
    await Promise.all([teardown.run((m) => logged.push(m)), teardown.run((m) => logged.push(m))]);
    expect(ran).toEqual(["c", "a"]);
    expect(seen).toEqual([["b", "a"]]);
    expect(logged).toEqual(["teardown: b failed: boom"]);
    expect(teardown.pending()).toEqual([]);
  });
});
