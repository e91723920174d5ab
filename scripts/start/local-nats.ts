/**
 * The broker for `npm start`: the one at NATS_URL when it answers, or else a
 * nats-server of our own with the project's config (deploy/nats/nats.conf:
 * JetStream, max_payload, and the MQTT listener fixed readers publish to).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect as tcpConnect } from "node:net";
import path from "node:path";
import { connect } from "@nats-io/transport-node";
import { repoRoot } from "@whereabouts/shared";

const NATS_BINARIES = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"];
const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

export async function natsAnswers(url: string): Promise<boolean> {
  try {
    const nc = await connect({ servers: url.split(","), timeout: 1500, maxReconnectAttempts: 0 });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

/** Whether anything accepts a TCP connection there: enough to tell an MQTT listener from none. */
export function tcpAnswers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

function findNatsServer(): string | undefined {
  const onPath = (process.env.PATH ?? "").split(path.delimiter).map((dir) => path.join(dir, "nats-server"));
  return [...onPath, ...NATS_BINARIES].find((file) => existsSync(file));
}

/**
 * The project's config with the MQTT port swapped for `mqttPort` (the client
 * port and store directory come as flags, which override the file).
 */
export function natsConfig(mqttPort: number): string {
  const shipped = readFileSync(path.join(repoRoot, "deploy", "nats", "nats.conf"), "utf8");
  const config = shipped.replace(/(mqtt\s*\{[^}]*?\bport:\s*)\d+/, `$1${mqttPort}`);
  if (!/mqtt\s*\{/.test(config)) throw new Error("deploy/nats/nats.conf has no mqtt block");
  return config;
}

export interface LocalNats {
  stop(): Promise<void>;
}

export async function startLocalNats(options: { url: string; mqttPort: number; dataDir: string; log: (m: string) => void }): Promise<LocalNats> {
  const first = new URL(options.url.split(",")[0]!);
  if (!LOOPBACK.has(first.hostname)) {
    throw new Error(`NATS does not answer at ${options.url}; npm start runs a nats-server of its own only on this machine (a loopback NATS_URL)`);
  }
  const bin = findNatsServer();
  if (!bin) {
    throw new Error(`NATS does not answer at ${options.url} and no nats-server binary was found: install one (e.g. apt-get install nats-server) or point NATS_URL at a broker`);
  }
  const dir = path.join(options.dataDir, "nats");
  mkdirSync(dir, { recursive: true });
  const configFile = path.join(dir, "nats.conf");
  writeFileSync(configFile, natsConfig(options.mqttPort));
  const port = first.port || "4222";
  const logFile = path.join(dir, "nats-server.log");
  const args = ["-c", configFile, "-a", "127.0.0.1", "-p", port, "-sd", path.join(dir, "store"), "-l", logFile];
  options.log(`NATS does not answer at ${options.url}: starting ${bin} ${args.join(" ")} (MQTT on 127.0.0.1:${options.mqttPort})`);
  // Its own process group: a Ctrl-C on the terminal reaches npm start, which stops the broker after the services drained.
  const child: ChildProcess = spawn(bin, args, { stdio: ["ignore", "ignore", "inherit"], detached: true });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 10_000;
  while (!(await natsAnswers(options.url))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`nats-server did not start (exit code ${child.exitCode ?? "none"}; log: ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
  };
}
