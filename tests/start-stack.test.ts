/**
 * `npm start` as an operator runs it (scripts/start.ts in a child process):
 * it creates a database that does not exist yet, migrates, creates the
 * streams, runs the gateway and the three services until /readyz is 200, and
 * stops every process on SIGTERM. Plus: two migrators started at once on a
 * fresh database migrate once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listMigrations, migrationsDir, repoRoot } from "@whereabouts/shared";
import { createTestDatabase, eventually, freePort, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { SCHEMAS } from "../scripts/migrate.ts";
import { childPids, waitReady } from "./start-support.ts";

/** A database name that does not exist yet (created, then dropped, by the fixture). */
async function freshDatabaseUrl(label: string): Promise<TestDatabase> {
  const db = await createTestDatabase(label);
  await db.drop();
  return db;
}

async function databaseExists(url: string): Promise<boolean> {
  const admin = new URL(url);
  const name = decodeURIComponent(admin.pathname.slice(1));
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    return ((await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount ?? 0) > 0;
  } finally {
    await client.end();
  }
}

async function migrationRows(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const out: Record<string, string[]> = {};
    for (const { schema } of SCHEMAS) {
      const { rows } = await client.query<{ migration_name: string }>(
        `SELECT migration_name FROM "${schema}"."_prisma_migrations" ORDER BY migration_name`,
      );
      out[schema] = rows.map((r) => r.migration_name);
    }
    return out;
  } finally {
    await client.end();
  }
}

async function expectedMigrations() {
  const out: Record<string, string[]> = {};
  for (const { schema } of SCHEMAS) out[schema] = (await listMigrations(migrationsDir(schema))).map((m) => m.name);
  return out;
}

/** Running, i.e. neither gone nor a zombie waiting for a reaper. */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

function run(script: string, env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string; exit: Promise<{ code: number | null; signal: string | null }> } {
  // An empty value unsets the variable (the machine's own settings must not leak in).
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined && v !== ""));
  const child = spawn(process.execPath, ["--import", "tsx", script], { cwd: repoRoot, env: merged, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exit };
}

describe("npm start", () => {
  let nats: TestNats;
  let db: TestDatabase;
  let started: ReturnType<typeof run> | undefined;

  beforeAll(async () => {
    nats = await startTestNats();
    db = await freshDatabaseUrl("start_stack");
  });
  afterAll(async () => {
    if (started && started.child.exitCode === null) {
      started.child.kill("SIGKILL");
      for (const pid of childPids(started.child.pid!)) process.kill(pid, "SIGKILL");
    }
    await nats?.destroy();
    await db?.drop();
  });

  it("creates the database, migrates, serves /readyz, and stops every process on SIGTERM", { timeout: 120_000 }, async () => {
    expect(await databaseExists(db.url)).toBe(false);
    const port = await freePort();
    started = run("scripts/start.ts", {
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      GATEWAY_DATABASE_URL: "",
      CATALOG_DATABASE_URL: "",
      TRACKING_DATABASE_URL: "",
      REPORTING_DATABASE_URL: "",
      REDIS_URL: "",
    });
    const base = `http://127.0.0.1:${port}`;

    expect(await waitReady(base, started, 90_000), started.output()).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(await ready.json()).toEqual({ status: "ready", checks: { nats: true, catalog: true, tracking: true, reporting: true } });

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    expect(await databaseExists(db.url)).toBe(true);
    expect(await migrationRows(db.url)).toEqual(await expectedMigrations());

    const cmdline = (pid: number) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
      } catch {
        return "";
      }
    };
    // The four processes, and whatever else start.ts runs (tsx's esbuild service).
    const pids = childPids(started.child.pid!);
    // Compiled, as production runs them: node services/<name>/dist/main.js.
    const services = pids.filter((pid) => /services\/\w+\/dist\/main\.js/.test(cmdline(pid)));
    expect(services.map((pid) => /services\/(\w+)\//.exec(cmdline(pid))![1]).sort()).toEqual(["catalog", "gateway", "reporting", "tracking"]);

    const stoppedAt = Date.now();
    started.child.kill("SIGTERM");
    const { code, signal } = await started.exit;
    expect({ code, signal }, started.output()).toEqual({ code: 0, signal: null });
    expect(Date.now() - stoppedAt).toBeLessThan(10_000);
    // The services were waited for; helpers die with their parent.
    for (const pid of services) expect(alive(pid), `${cmdline(pid)} still running`).toBe(false);
    const others = pids.filter((pid) => !services.includes(pid));
    await eventually(async () => (others.some(alive) ? undefined : true), 2000).catch(() => undefined);
    for (const pid of others) expect(alive(pid), `${cmdline(pid)} still running`).toBe(false);
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });
});

describe("npm run migrate", () => {
  it("two migrators started at once on a missing database create it and apply each migration once", { timeout: 60_000 }, async () => {
    const db = await freshDatabaseUrl("migrate_twice");
    try {
      const env = { DATABASE_URL: db.url, GATEWAY_DATABASE_URL: "", CATALOG_DATABASE_URL: "", TRACKING_DATABASE_URL: "", REPORTING_DATABASE_URL: "" };
      const runs = [run("scripts/migrate.ts", env), run("scripts/migrate.ts", env)];
      const exits = await Promise.all(runs.map((r) => r.exit));
      for (const [i, e] of exits.entries()) expect(e, runs[i]!.output()).toEqual({ code: 0, signal: null });
      const expected = await expectedMigrations();
      expect(await migrationRows(db.url)).toEqual(expected);
      const applied = runs.map((r) => r.output().split("\n").filter((l) => l.startsWith("applied ")).length);
      const total = Object.values(expected).flat().length;
      expect(applied[0]! + applied[1]!).toBe(total);
    } finally {
      await db.drop();
    }
  });
});
