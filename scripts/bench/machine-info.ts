/**
 * The machine the figures come from, printed above the table and kept in the
 * JSON: cores, CPU model, memory, Node, Postgres and nats-server versions.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import os from "node:os";
import type pg from "pg";
import { connectSql } from "./sql-client.ts";

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  totalMemoryGiB: number;
  node: string;
  postgres: string;
  natsServer: string;
  loadAverage: number[];
}

async function cpuModel(): Promise<string> {
  try {
    const text = await readFile("/proc/cpuinfo", "utf8");
    return /^model name\s*:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? os.cpus()[0]?.model ?? "unknown";
  } catch {
    return os.cpus()[0]?.model ?? "unknown";
  }
}

async function postgresVersion(databaseUrl: string | undefined): Promise<string> {
  if (!databaseUrl) return "unknown (no database URL)";
  let client: pg.Client | undefined;
  try {
    client = await connectSql(databaseUrl);
    const { rows } = await client.query<{ server_version: string }>("SHOW server_version");
    return rows[0]?.server_version ?? "unknown";
  } catch (err) {
    return `unknown (${(err as Error).message})`;
  } finally {
    await client?.end().catch(() => undefined);
  }
}

function natsServerVersion(): Promise<string> {
  return new Promise((resolve) => {
    execFile(process.env.NATS_SERVER_BIN || "nats-server", ["--version"], { timeout: 5000 }, (err, stdout) =>
      resolve(err ? "unknown" : stdout.trim().replace(/^nats-server:\s*/, "")),
    );
  });
}

export async function describeMachine(databaseUrl: string | undefined): Promise<MachineInfo> {
  return {
    nproc: os.availableParallelism(),
    cpuModel: await cpuModel(),
    totalMemoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    postgres: await postgresVersion(databaseUrl),
    natsServer: await natsServerVersion(),
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export function formatMachine(m: MachineInfo): string {
  return [
    `machine: ${m.nproc} cores (${m.cpuModel}), ${m.totalMemoryGiB} GiB, load average ${m.loadAverage.join(" ")}`,
    `software: node ${m.node}, postgres ${m.postgres}, nats-server ${m.natsServer}`,
  ].join("\n");
}
