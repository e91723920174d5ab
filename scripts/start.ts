/**
 * `npm start`: find or start the servers (Postgres, NATS), create the
 * database if missing, apply every migration, bind the streams to this
 * database's deployment and create them, compile the services (scripts/build.ts),
 * then run the gateway and the three services as separate processes
 * (`node services/<name>/dist/main.js`, as in production) until SIGINT/SIGTERM, which each of them
 * handles by finishing in-flight work before exiting. A process that dies on
 * its own is restarted; one that does not stop within the grace period is
 * killed. Servers it started itself are stopped last.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { connect } from "@nats-io/transport-node";
import { z } from "zod";
import {
  bindDeployment,
  DEFAULT_NATS_URL,
  DeploymentMismatchError,
  ensureStreams,
  OpsPort,
  parseConfig,
  repoRoot,
  serviceNodeFlags,
  STREAM_PREFIX,
  StreamPrefix,
} from "@whereabouts/shared";
import { BUNDLES, buildBundles } from "./build.ts";
import { migrateAll } from "./migrate.ts";
import { chooseDatabase } from "./start/database.ts";
import type { EmbeddedPostgres } from "./start/embedded-postgres.ts";
import { natsAnswers, startLocalNats, tcpAnswers, type LocalNats } from "./start/local-nats.ts";

const PROCESSES = ["catalog", "tracking", "reporting", "gateway"] as const;

/** What npm start itself reads; the services parse the rest of the environment they inherit. */
const StartEnv = z.object({
  NATS_URL: z.string().min(1).default(DEFAULT_NATS_URL),
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().min(1).optional(),
  STREAM_PREFIX: StreamPrefix,
  /** `1`: run the embedded PostgreSQL even when another one answers (at DATABASE_URL's address). */
  EMBEDDED_POSTGRES: z.enum(["0", "1", "true", "false"]).optional(),
  /** Where the servers npm start runs itself keep their data (pg/, nats/). */
  DATA_DIR: z.string().min(1).default(path.join(repoRoot, ".data")),
  /** The MQTT listener of the nats-server npm start runs itself, and where it looks for one on a broker it finds. */
  MQTT_PORT: z.coerce.number().int().min(1).max(65535).default(1883),
  /** Each process's ops server (/healthz, /readyz, /metrics) on its own port: OPS_PORT + its index; 0: any free port. */
  OPS_PORT: OpsPort,
  /** How long the processes get to finish in-flight work before SIGKILL. */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().positive().default(8_000),
});

const config = parseConfig(StartEnv);
const log = (message: string) => console.error(`[start] ${message}`);

const children = new Map<string, ChildProcess>();
let stopping = false;
/** Until main() has run: a signal meanwhile waits for it, so no server it is starting is left behind. */
let booting: Promise<void> = Promise.resolve();

let nats: LocalNats | undefined;
let postgres: EmbeddedPostgres | undefined;
/** What the services get on top of the environment (DATABASE_URL of an embedded Postgres). */
let serviceEnv: Record<string, string> = {};

/** A broker without an MQTT listener takes NATS clients only: say so once, with the fix. */
async function warnWithoutMqtt(): Promise<void> {
  const host = new URL(config.NATS_URL.split(",")[0]!).hostname;
  if (await tcpAnswers(host, config.MQTT_PORT)) return;
  log(
    `warning: the broker at ${config.NATS_URL} has no MQTT listener at ${host}:${config.MQTT_PORT}: fixed MQTT readers cannot connect. ` +
      "Give it one with an mqtt block (mqtt { port: 1883 }, which also needs server_name and JetStream; see deploy/nats/nats.conf), " +
      "set MQTT_PORT if it listens elsewhere, or stop it and let npm start run its own nats-server.",
  );
}

function launch(name: (typeof PROCESSES)[number]) {
  const entry = path.join(repoRoot, BUNDLES[name]!.dir, "dist", "main.js");
  const env = { ...process.env, ...serviceEnv, OPS_PORT: String(config.OPS_PORT && config.OPS_PORT + PROCESSES.indexOf(name)) };
  const child = spawn(process.execPath, [...serviceNodeFlags(name, env), entry], { stdio: "inherit", env, cwd: repoRoot });
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
  let bootTimer: NodeJS.Timeout | undefined;
  await Promise.race([booting.catch(() => undefined), new Promise((r) => (bootTimer = setTimeout(r, config.SHUTDOWN_GRACE_MS)))]);
  clearTimeout(bootTimer);
  const running = [...children.values()];
  for (const child of running) child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([
    Promise.all(running.map(exited)).then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), config.SHUTDOWN_GRACE_MS))),
  ]);
  clearTimeout(timer);
  if (!finished) {
    log(`processes still running after ${config.SHUTDOWN_GRACE_MS} ms; killing them`);
    for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await Promise.all(running.map(exited));
  }
  await stopServers();
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

/** The servers npm start runs itself, after everything that uses them. */
async function stopServers(): Promise<void> {
  await nats?.stop();
  await postgres?.stop();
}

async function main() {
  if (await natsAnswers(config.NATS_URL)) await warnWithoutMqtt();
  else nats = await startLocalNats({ url: config.NATS_URL, mqttPort: config.MQTT_PORT, dataDir: config.DATA_DIR, log });
  const embeddedRequested = config.EMBEDDED_POSTGRES === "1" || config.EMBEDDED_POSTGRES === "true";
  const database = await chooseDatabase({ env: process.env, embeddedRequested, dataDir: config.DATA_DIR, log });
  postgres = database.embedded;
  serviceEnv = database.env;
  const env = { ...process.env, ...serviceEnv };
  const { deploymentId } = await migrateAll(env, log);

  const nc = await connect({
    servers: config.NATS_URL.split(","),
    ...(config.NATS_USER ? { user: config.NATS_USER, pass: config.NATS_PASSWORD ?? "" } : {}),
  });
  try {
    // Refused here, once and before any service runs, when the streams belong to another database.
    const bound = await bindDeployment(nc, deploymentId);
    if (bound.adoptedStreams.length) log(`streams made before deployment ids existed now belong to deployment ${deploymentId}: ${bound.adoptedStreams.join(", ")}`);
    await ensureStreams(nc);
  } finally {
    await nc.close();
  }
  log(`database migrated, streams ready (deployment ${deploymentId}${STREAM_PREFIX ? `, STREAM_PREFIX ${STREAM_PREFIX}` : ""})`);
  // Always from the current sources: about a second.
  await buildBundles([...PROCESSES]);
  // A signal during the steps above stops before anything is launched.
  if (stopping) return;
  PROCESSES.forEach(launch);
}

booting = main();
booting.catch(async (err: unknown) => {
  // The mismatch message is the operator's instructions: no prefix to read past.
  if (err instanceof DeploymentMismatchError) console.error(err.message);
  else log(`failed: ${(err as Error).message}`);
  if (stopping) return; // the signal handler stops the servers
  await stopServers().catch(() => undefined);
  process.exit(1);
});
