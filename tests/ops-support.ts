/**
 * Support for the ops tests: services run as real processes (`node --import
 * tsx services/<svc>/src/main.ts`, as the images run them), probes read over
 * HTTP, and a TCP proxy in front of Postgres that a test can cut and restore
 * without touching the machine's database server.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import path from "node:path";
import { DEFAULT_DATABASE_URL, repoRoot } from "@whereabouts/shared";
import { eventually, freePort, within } from "@whereabouts/shared/testing";

export type ProcessName = "gateway" | "catalog" | "tracking" | "reporting";

export interface ServiceProcess {
  name: ProcessName;
  child: ChildProcess;
  opsUrl: string;
  /** Everything it wrote so far (JSON log lines), for failure messages and log checks. */
  output(): string;
  /** Its log lines, parsed. */
  logs(): Array<Record<string, unknown>>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL if still running (cleanup). */
  kill(): void;
}

export async function spawnService(
  name: ProcessName,
  env: Record<string, string>,
  /** Another way to run it (a compiled bundle in a pruned install); default: its sources with tsx. */
  command: { args: string[]; cwd: string } = { args: ["--import", "tsx", path.join(repoRoot, "services", name, "src", "main.ts")], cwd: repoRoot },
): Promise<ServiceProcess> {
  const opsPort = await freePort();
  const child = spawn(process.execPath, command.args, {
    cwd: command.cwd,
    env: {
      ...process.env,
      LOG_LEVEL: "info",
      // Only what the test gives: no per-service URL from the developer's shell.
      GATEWAY_DATABASE_URL: "",
      CATALOG_DATABASE_URL: "",
      TRACKING_DATABASE_URL: "",
      REPORTING_DATABASE_URL: "",
      REDIS_URL: "",
      ...env,
      OPS_PORT: String(opsPort),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    name,
    child,
    opsUrl: `http://127.0.0.1:${opsPort}`,
    output: () => out,
    logs: () =>
      out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exit,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

export async function probe(url: string): Promise<{ status: number; body: unknown } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    return { status: res.status, body: await res.json() };
  } catch {
    return undefined;
  }
}

/** Waits until the process's ops /readyz answers `status` (fails early if it exits). */
export async function waitForReadiness(proc: ServiceProcess, status: 200 | 503, timeoutMs = 30_000): Promise<unknown> {
  let stopped = false;
  try {
    return await Promise.race([
      eventually(
        async () => {
          if (stopped) return null;
          const res = await probe(`${proc.opsUrl}/readyz`);
          return res?.status === status ? res.body : undefined;
        },
        timeoutMs,
        100,
      ),
      // `eventually` retries through errors: an exit ends the wait at once instead.
      proc.exit.then(({ code, signal }) => {
        throw new Error(`${proc.name} exited (code ${code}, signal ${signal})`);
      }),
    ]);
  } catch (err) {
    throw new Error(`${proc.name} /readyz did not become ${status}:\n${proc.output().slice(-4000)}`, { cause: err });
  } finally {
    stopped = true;
  }
}

/** Resolves with the exit, or rejects after `timeoutMs`. */
export const exitWithin = (proc: ServiceProcess, timeoutMs: number) =>
  within(proc.exit, timeoutMs, () => `${proc.name} still running after ${timeoutMs} ms:\n${proc.output().slice(-4000)}`);

export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Everything a process's ops `/metrics` serves, parsed from the Prometheus text format. */
export async function scrapeMetrics(proc: ServiceProcess): Promise<MetricSample[]> {
  const res = await fetch(`${proc.opsUrl}/metrics`, { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`${proc.name} /metrics answered ${res.status}`);
  const samples: MetricSample[] = [];
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
export function sumMetric(samples: MetricSample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

export interface TcpProxy {
  port: number;
  /** `url` with its host and port replaced by the proxy's. */
  rewrite(url: string): string;
  /** Refuses new connections and cuts the open ones, as a database outage would. */
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** A TCP proxy to the Postgres server of the test databases. */
export async function startPostgresProxy(): Promise<TcpProxy> {
  const target = new URL(process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  const targetHost = target.hostname || "127.0.0.1";
  const targetPort = Number(target.port) || 5432;
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = createConnection(targetPort, targetHost);
        sockets.add(client);
        sockets.add(upstream);
        const end = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on("error", end).on("close", end);
        upstream.on("error", end).on("close", end);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        server = s;
        resolve();
      });
    });
  const cut = async () => {
    const s = server;
    server = undefined;
    // close() waits for open connections, so they are cut first.
    const closed = s ? new Promise<void>((resolve) => s.close(() => resolve())) : Promise.resolve();
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    await closed;
  };
  await listen();
  return {
    port,
    rewrite(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    cut,
    restore: listen,
    close: cut,
  };
}
