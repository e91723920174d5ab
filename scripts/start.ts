/**
 * `npm start`: create the database if missing, apply every migration, create
 * the JetStream streams, then run the gateway and the three services as
 * separate processes until SIGINT/SIGTERM, which each of them handles by
 * finishing in-flight work before exiting.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { connect } from "@nats-io/transport-node";
import { DEFAULT_NATS_URL, ensureStreams, repoRoot } from "@whereabouts/shared";
import { migrateAll } from "./migrate.ts";

const PROCESSES = ["catalog", "tracking", "reporting", "gateway"] as const;
const natsUrl = process.env.NATS_URL || DEFAULT_NATS_URL;
const log = (message: string) => console.error(`[start] ${message}`);

async function natsReachable(): Promise<boolean> {
  try {
    const nc = await connect({ servers: natsUrl.split(","), timeout: 1500, maxReconnectAttempts: 0 });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

/** Starts a local nats-server with the project's config when none answers. */
async function ensureNats(): Promise<ChildProcess | undefined> {
  if (await natsReachable()) return undefined;
  const bin = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find(existsSync);
  if (!bin) throw new Error(`NATS does not answer at ${natsUrl} and no nats-server binary was found`);
  const config = path.join(repoRoot, "deploy", "nats", "nats.conf");
  const storeDir = path.join(repoRoot, ".data", "nats");
  mkdirSync(storeDir, { recursive: true });
  const port = new URL(natsUrl.split(",")[0]!).port || "4222";
  const args = existsSync(config) ? ["-c", config, "-p", port, "-sd", storeDir] : ["-a", "127.0.0.1", "-p", port, "-js", "-sd", storeDir];
  log(`starting nats-server ${args.join(" ")}`);
  const child = spawn(bin, args, { stdio: "inherit" });
  for (let i = 0; i < 100 && !(await natsReachable()); i++) await new Promise((r) => setTimeout(r, 100));
  if (!(await natsReachable())) throw new Error("nats-server did not start");
  return child;
}

async function main() {
  const nats = await ensureNats();
  await migrateAll(process.env, log);
  const nc = await connect({ servers: natsUrl.split(",") });
  await ensureStreams(nc);
  await nc.close();
  log("database migrated, streams ready");

  const children = new Map<string, ChildProcess>();
  let stopping = false;
  const launch = (name: (typeof PROCESSES)[number]) => {
    const entry = path.join(repoRoot, "services", name, "src", "main.ts");
    const child = spawn(process.execPath, ["--import", "tsx", entry], { stdio: "inherit", env: process.env, cwd: repoRoot });
    children.set(name, child);
    child.on("exit", (code, signal) => {
      children.delete(name);
      if (stopping) return;
      log(`${name} exited (${signal ?? code}); restarting in 1 s`);
      setTimeout(() => !stopping && launch(name), 1000);
    });
  };
  PROCESSES.forEach(launch);

  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping`);
    const exits = [...children.values()].map((child) => new Promise((resolve) => child.once("exit", resolve)));
    for (const child of children.values()) child.kill("SIGTERM");
    await Promise.race([Promise.all(exits), new Promise((r) => setTimeout(r, 25_000))]);
    if (nats) {
      const exited = new Promise((resolve) => nats.once("exit", resolve));
      nats.kill("SIGTERM");
      await exited;
    }
    process.exit(0);
  };
  process.on("SIGINT", (s) => void shutdown(s));
  process.on("SIGTERM", (s) => void shutdown(s));
}

main().catch((err: unknown) => {
  log(`failed: ${(err as Error).message}`);
  process.exit(1);
});
