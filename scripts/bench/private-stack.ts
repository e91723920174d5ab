/**
 * The stack the benchmark measures when no BASE_URL is given: a private
 * database and nats-server, every migration and stream, then the gateway and
 * the three services as separate processes launched exactly as
 * scripts/start.ts launches them (`node --enable-source-maps services/<name>/dist/main.js`,
 * compiled first),
 * with the rate limit out of the way. An organization and an all-scopes key
 * come from the admin CLI's own code.
 *
 * `npm run chaos` uses the same stack and its handles: each process can be
 * SIGKILLed and started again alone, and the nats-server stopped and started
 * on the same port and store.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { connectNats, createLogger, ensureStreams, repoRoot, serviceNodeFlags } from "@whereabouts/shared";
import { createTestDatabase, freePort, freePortIn, startTestNats, type TestNats } from "@whereabouts/shared/testing";
import { BUNDLES, buildBundles } from "../build.ts";
import { migrateAll } from "../migrate.ts";
import { runAdminCommand } from "../../services/gateway/src/admin/admin-cli.ts";
import { createIdentityClient, createIdentityStore } from "../../services/gateway/src/identity/identity-store.ts";
import { hasExited, killChild, stopChild, type Teardown } from "./teardown.ts";

export const STACK_PROCESSES = ["catalog", "tracking", "reporting", "gateway"] as const;
export type StackProcess = (typeof STACK_PROCESSES)[number];

export interface RunningStack {
  baseUrl: string;
  apiKey: string;
  orgId: number;
  natsUrl: string;
  databaseUrl: string;
  /** Live service processes, for RSS sampling; a restarted one replaces its entry. */
  processes: Map<StackProcess, ChildProcess>;
  /** The private broker: `stop()` and `start()` keep its port and JetStream store. */
  nats: TestNats;
  /** Signals one process (SIGKILL: a crash) and resolves once it is gone. */
  kill(name: StackProcess, signal?: NodeJS.Signals): Promise<void>;
  /** Starts a stopped process again, as at first. */
  start(name: StackProcess): void;
  /** Until the gateway's /readyz answers 200 (every service answers its ping); fails if a process exits. */
  waitReady(): Promise<void>;
}

export interface PrivateStackOptions {
  keep: boolean;
  /** Where the processes' own log lines (warn and above) go. */
  serviceLog: string;
  teardown: Teardown;
  log: (m: string) => void;
  /** Names the database `<prefix><label>_<random>` and the processes `whereabouts-<label>-<name>`. */
  label?: string;
  databasePrefix?: string;
  /** Keeps the nats-server's port inside this range (a shared machine's allotment). */
  natsPorts?: { from: number; to: number };
}

/** So high that no case ever meets the per-key fixed window. */
const RATE_LIMIT_MAX = "100000000";
const READY_TIMEOUT_MS = 120_000;

const OrgCreated = z.object({ id: z.number().int() });
const KeyCreated = z.object({ key: z.string().min(1) });

/** An organization named Bench and an all-scopes key, through the admin CLI's command code. */
export async function createBenchTenant(databaseUrl: string): Promise<{ orgId: number; apiKey: string }> {
  const db = createIdentityClient(databaseUrl);
  try {
    const identity = createIdentityStore(db);
    const org = OrgCreated.parse(await runAdminCommand(["org", "create", "--name", "Bench"], identity));
    const key = KeyCreated.parse(await runAdminCommand(["key", "create", "--org", String(org.id), "--scopes", "all", "--name", "bench"], identity));
    return { orgId: org.id, apiKey: key.key };
  } finally {
    await db.$disconnect();
  }
}

async function waitReady(baseUrl: string, processes: Map<StackProcess, ChildProcess>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    for (const [name, child] of processes) {
      if (hasExited(child)) throw new Error(`${name} exited during start-up (${child.signalCode ?? child.exitCode})`);
    }
    try {
      const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`gateway not ready within ${READY_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function startPrivateStack(options: PrivateStackOptions): Promise<RunningStack> {
  const { teardown, log } = options;
  const label = options.label ?? "bench";
  const db = await createTestDatabase(label, { prefix: options.databasePrefix });
  teardown.add("database", async () => {
    if (options.keep) log(`kept database ${db.url}`);
    else await db.drop();
  });
  const natsPort = options.natsPorts ? await freePortIn(options.natsPorts.from, options.natsPorts.to) : undefined;
  const nats = await startTestNats({ port: natsPort });
  teardown.add("nats-server", () => nats.destroy());
  log(`database ${db.url}, nats ${nats.url}, service logs ${options.serviceLog}`);

  await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  const nc = await connectNats({ url: nats.url, name: "bench-setup", logger: createLogger("bench", "silent") });
  await ensureStreams(nc);
  await nc.close();

  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: db.url,
    NATS_URL: nats.url,
    HOST: "127.0.0.1",
    PORT: String(port),
    OPS_PORT: "0",
    // BENCH_SERVICE_LOG_LEVEL=debug shows e.g. tracking's per-batch timings.
    LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL || "warn",
    RATE_LIMIT_MAX,
    // The webhooks case delivers to a receiver on loopback.
    WEBHOOK_ALLOW_PRIVATE: "true",
    // The ingest-retention case measures ingest while retention deletes: passes every second.
    TRACKING_RETENTION_INTERVAL_MS: "1000",
  };
  // Service-specific overrides of the caller's shell must not point elsewhere.
  for (const name of ["GATEWAY", "CATALOG", "TRACKING", "REPORTING"]) delete env[`${name}_DATABASE_URL`];
  delete env.REDIS_URL;

  mkdirSync(path.dirname(options.serviceLog), { recursive: true });
  const logFd = openSync(options.serviceLog, "a");
  const processes = new Map<StackProcess, ChildProcess>();
  teardown.add("services", async () => {
    await Promise.all([...processes.values()].map((child) => stopChild(child)));
    closeSync(logFd);
  });
  const start = (name: StackProcess) => {
    const running = processes.get(name);
    if (running && !hasExited(running)) throw new Error(`${name} is already running (pid ${running.pid})`);
    const entry = path.join(repoRoot, BUNDLES[name]!.dir, "dist", "main.js");
    // As scripts/start.ts runs them, plus a process title: on a shared machine a
    // `pkill -f services/<name>/dist/main.js` meant for another stack must not
    // stop this one mid-run. Their logs go to a file: stdout is the table's,
    // stderr the progress lines'.
    // BENCH_CPU_PROF=<dir>: each service writes a .cpuprofile there when it stops.
    const profile = process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${path.join(process.env.BENCH_CPU_PROF, name)}`] : [];
    // BENCH_NODE_OPTIONS="--trace-gc ...": extra node flags for every service (memory investigations);
    // BENCH_<SERVICE>_NODE_OPTIONS (BENCH_TRACKING_NODE_OPTIONS, ...) for one, after those.
    const flagsOf = (variable: string) => process.env[variable]?.split(/\s+/).filter(Boolean) ?? [];
    const extra = [...flagsOf("BENCH_NODE_OPTIONS"), ...flagsOf(`BENCH_${name.toUpperCase()}_NODE_OPTIONS`)];
    // BENCH_NODE_OPTIONS flags come after npm start's (serviceNodeFlags), so they win.
    const args = [`--title=whereabouts-${label}-${name}`, ...profile, ...serviceNodeFlags(name, env), ...extra, entry];
    processes.set(name, spawn(process.execPath, args, { cwd: repoRoot, env, stdio: ["ignore", logFd, logFd] }));
  };
  const kill = async (name: StackProcess, signal: NodeJS.Signals = "SIGKILL") => {
    const child = processes.get(name);
    if (child) await killChild(child, signal);
  };
  await buildBundles([...STACK_PROCESSES]);
  for (const name of STACK_PROCESSES) start(name);
  await waitReady(baseUrl, processes);
  const tenant = await createBenchTenant(db.url);
  log(`stack ready at ${baseUrl} (org ${tenant.orgId})`);
  return {
    baseUrl,
    apiKey: tenant.apiKey,
    orgId: tenant.orgId,
    natsUrl: nats.url,
    databaseUrl: db.url,
    processes,
    nats,
    kill,
    start,
    waitReady: () => waitReady(baseUrl, processes),
  };
}
