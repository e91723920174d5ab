/**
 * Starts baseline-server.ts as its own process on a free port against the
 * stack's database and waits until it answers; stopped at teardown.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { repoRoot } from "@whereabouts/shared";
import { freePort } from "@whereabouts/shared/testing";
import { hasExited, stopChild, type Teardown } from "./teardown.ts";

const SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "baseline-server.ts");

export async function startBaselineServer(o: { databaseUrl: string; orgId: number; teardown: Teardown }): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", SERVER], {
    cwd: repoRoot,
    env: { ...process.env, DATABASE_URL: o.databaseUrl, PORT: String(port), BASELINE_ORG_ID: String(o.orgId) },
    stdio: ["ignore", 2, 2],
  });
  o.teardown.add("baseline server", () => stopChild(child, 3000));
  const url = `http://127.0.0.1:${port}`;
  // Generous: it compiles while the seeding keeps both cores busy.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (hasExited(child)) throw new Error(`baseline server exited (${child.signalCode ?? child.exitCode})`);
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) return url;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("baseline server did not answer within 120 s");
    await new Promise((r) => setTimeout(r, 100));
  }
}
