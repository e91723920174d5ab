/**
 * `npm start`: create the database if missing, apply every migration, create
 * the JetStream streams, then run the gateway and the three services as
 * separate processes until SIGINT/SIGTERM, which each of them handles by
 * finishing in-flight work before exiting. A process that dies on its own is
 * restarted; one that does not stop within the grace period is killed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { connect } from "@nats-io/transport-node";
import { DEFAULT_NATS_URL, ensureStreams, repoRoot } from "@whereabouts/shared";
import { migrateAll } from "./migrate.ts";

const PROCESSES = ["catalog", "tracking", "reporting", "gateway"] as const;
/** How long the processes get to finish in-flight work before SIGKILL. */
const GRACE_MS = Number(process.env.SHUTDOWN_GRACE_MS) || 8_000;
/** A 1 MiB request body inside its RPC envelope must fit (the server's default is 1 MB). */
const NATS_MAX_PAYLOAD = 8 * 1024 * 1024;
const natsUrl = process.env.NATS_URL || DEFAULT_NATS_URL;
const log = (message: string) => console.error(`[start] ${message}`);

const children = new Map<string, ChildProcess>();
let nats: ChildProcess | undefined;
let stopping = false;

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
  const storeDir = path.join(repoRoot, ".data", "nats");
  mkdirSync(storeDir, { recursive: true });
  let config = path.join(repoRoot, "deploy", "nats", "nats.conf");
  if (!existsSync(config)) {
    config = path.join(storeDir, "local.conf");
    writeFileSync(config, `max_payload: ${NATS_MAX_PAYLOAD}\njetstream: enabled\n`);
  }
  const port = new URL(natsUrl.split(",")[0]!).port || "4222";
  const args = ["-c", config, "-a", "127.0.0.1", "-p", port, "-js", "-sd", storeDir];
  log(`starting nats-server ${args.join(" ")}`);
  const child = spawn(bin, args, { stdio: "inherit" });
  for (let i = 0; i < 100 && !(await natsReachable()); i++) await new Promise((r) => setTimeout(r, 100));
  if (!(await natsReachable())) throw new Error("nats-server did not start");
  return child;
}

/** Each process's ops server (/healthz, /readyz, /metrics) on its own port: OPS_PORT (9464) + its index; 0: any free port. */
const OPS_BASE_PORT = process.env.OPS_PORT ? Number(process.env.OPS_PORT) : 9464;

function launch(name: (typeof PROCESSES)[number]) {
  const entry = path.join(repoRoot, "services", name, "src", "main.ts");
  const env = { ...process.env, OPS_PORT: String(OPS_BASE_PORT && OPS_BASE_PORT + PROCESSES.indexOf(name)) };
  const child = spawn(process.execPath, ["--import", "tsx", entry], { stdio: "inherit", env, cwd: repoRoot });
  children.set(name, child);
  child.on("exit", (code, signal) => {
    if (children.get(name) === child) children.delete(name);
    if (stopping) return;
    log(`${name} exited (${signal ?? code}); restarting in 1 s`);
    setTimeout(() => !stopping && launch(name), 1000);
  });
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once("exit", () => resolve()));

async function stopAll(signal: NodeJS.Signals): Promise<number> {
  log(`${signal}: stopping`);
  const running = [...children.values()];
  for (const child of running) child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([
    Promise.all(running.map(exited)).then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), GRACE_MS))),
  ]);
  clearTimeout(timer);
  if (!finished) {
    log(`processes still running after ${GRACE_MS} ms; killing them`);
    for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await Promise.all(running.map(exited));
  }
  if (nats) {
    nats.kill("SIGTERM");
    await exited(nats);
  }
  return finished ? 0 : 1;
}

function onSignal(signal: NodeJS.Signals) {
  if (stopping) return;
  stopping = true;
  stopAll(signal).then(
    (code) => process.exit(code),
    (err: unknown) => {
      log(`stopping failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

async function main() {
  nats = await ensureNats();
  await migrateAll(process.env, log);
  const nc = await connect({ servers: natsUrl.split(",") });
  await ensureStreams(nc);
  await nc.close();
  log("database migrated, streams ready");
  // A signal during the steps above stops before anything is launched.
  if (stopping) return;
  PROCESSES.forEach(launch);
}

main().catch(async (err: unknown) => {
  log(`failed: ${(err as Error).message}`);
  if (nats) {
    nats.kill("SIGTERM");
    await exited(nats);
  }
  process.exit(1);
});
