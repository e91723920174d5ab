/**
 * The Dockerfile's structure, checked without a Docker engine (none runs
 * here): one build stage, a small runtime stage (non-root user, tini as PID 1,
 * no dev tools), and one target per service plus the migrator, each
 * installing only its pruned workspace's production dependencies and running
 * its compiled entry point. tests/deploy-images.test.ts checks what the
 * pruned workspaces hold and that a service runs from one.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BUNDLES, buildBundles } from "../scripts/build.ts";
import { GatewayEnv } from "../services/gateway/src/config.ts";
import { parseDockerfile, repoRoot, stageChain, type DockerInstruction, type DockerStage } from "./deploy-render.ts";
import { serviceImageFlags } from "../packages/shared/src/node-flags.ts";

const stages = parseDockerfile(readFileSync(path.join(repoRoot, "Dockerfile"), "utf8"));
const stage = (name: string): DockerStage => {
  const found = stages.find((s) => s.name === name);
  if (!found) throw new Error(`no stage ${name}`);
  return found;
};
/** The services are the directories with a process entry. */
const SERVICES = readdirSync(path.join(repoRoot, "services")).filter((d) => existsSync(path.join(repoRoot, "services", d, "src/main.ts")));
const TARGETS = [...SERVICES, "migrate"];
/** The last instruction of this keyword along the target's FROM chain. */
const effective = (target: string, keyword: string): DockerInstruction | undefined => {
  for (const s of stageChain(stages, target)) {
    const found = s.instructions.filter((i) => i.keyword === keyword).at(-1);
    if (found) return found;
  }
  return undefined;
};
const exposed = (target: string) =>
  stageChain(stages, target)
    .flatMap((s) => s.instructions.filter((i) => i.keyword === "EXPOSE"))
    .flatMap((i) => i.args.split(/\s+/))
    .map((p) => Number(p.replace(/\/tcp$/, "")));

describe("Dockerfile", () => {
  it("has the build and runtime stages and one target per service plus migrate", () => {
    const names = stages.map((s) => s.name);
    expect(names).toContain("build");
    expect(names).toContain("runtime");
    expect(SERVICES.sort()).toEqual(["catalog", "gateway", "reporting", "tracking"]);
    for (const target of TARGETS) {
      expect(names, `target ${target}`).toContain(target);
      const chain = stageChain(stages, target).map((s) => s.name);
      expect(chain, `${target} builds on the runtime stage`).toContain("runtime");
      expect(chain, `${target} never ships the build stage`).not.toContain("build");
    }
  });

  it("pins one Node image for build and runtime, at least the engines version", () => {
    const build = stage("build").from;
    const runtime = stage("runtime").from;
    expect(runtime).toBe(build);
    const match = /^node:(\d+)\.(\d+)/.exec(runtime);
    expect(match, `${runtime} names a node major.minor`).not.toBeNull();
    const engines = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")).engines.node as string;
    const [, major, minor] = />=(\d+)\.(\d+)/.exec(engines)!;
    expect(Number(match![1]) * 1000 + Number(match![2])).toBeGreaterThanOrEqual(Number(major) * 1000 + Number(minor));
    expect(runtime).not.toMatch(/:latest$/);
  });

  it("installs, per target, only its own pruned workspace's production dependencies", () => {
    expect(stage("runtime").instructions.some((i) => i.keyword === "RUN" && /\bnpm (ci|install|i)\b/.test(i.args))).toBe(false);
    for (const target of TARGETS) {
      const workspace = target === "migrate" ? "shared" : target;
      const installs = stageChain(stages, target)
        .flatMap((s) => s.instructions)
        .filter((i) => i.keyword === "RUN" && /\bnpm (ci|install|i)\b/.test(i.args));
      expect(installs, target).toHaveLength(1);
      expect(installs[0]!.args).toMatch(/\bnpm ci\b/);
      expect(installs[0]!.args).toMatch(/--omit=dev\b/);
      const copies = stage(target).instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
      expect(copies, target).toContain(`--from=build /pruned/${workspace}/json/ ./`);
    }
  });

  it("runs as a non-root user with tini as PID 1 in every target", () => {
    for (const target of TARGETS) {
      const user = effective(target, "USER");
      expect(user, `${target} sets USER`).toBeDefined();
      expect(user!.args.split(":")[0], `${target} user`).not.toMatch(/^(root|0)$/);
      const entrypoint = effective(target, "ENTRYPOINT");
      expect(entrypoint?.exec, `${target} ENTRYPOINT in exec form`).toBeDefined();
      expect(entrypoint!.exec![0]).toMatch(/(^|\/)tini$/);
      expect(entrypoint!.exec).toContain("--");
    }
  });

  it("has no dev tools in the runtime image", () => {
    const devTool = /\b(tsc|vitest|eslint|turbo|prettier|prisma|typescript|testcontainers)\b/;
    for (const target of TARGETS) {
      for (const s of stageChain(stages, target)) {
        for (const i of s.instructions) {
          if (["RUN", "CMD", "ENTRYPOINT"].includes(i.keyword)) expect(i.args, `${s.name}: ${i.keyword}`).not.toMatch(devTool);
          if (i.keyword === "COPY" && /--from=/.test(i.args)) {
            // Build output only: never the build stage's node_modules (dev deps).
            expect(i.args, `${s.name}: ${i.args}`).not.toMatch(/node_modules/);
            expect(i.args, `${s.name}: ${i.args}`).not.toMatch(/--from=\S+\s+\/app\/?\s/);
          }
        }
      }
    }
  });

  it("gives each target a CMD running its compiled entry point with node (no loader)", async () => {
    await buildBundles(Object.keys(BUNDLES));
    for (const svc of SERVICES) {
      const cmd = effective(svc, "CMD");
      // As npm start runs it (node-flags.ts), less the heap maximum: the container's memory limit sets that.
      expect(cmd?.exec, `${svc} CMD in exec form`).toEqual(["node", ...serviceImageFlags(svc), `services/${svc}/dist/main.js`]);
      // Defined in the target itself, not inherited from another service.
      expect(stage(svc).instructions.some((i) => i.keyword === "CMD")).toBe(true);
    }
    expect(effective("migrate", "CMD")?.exec).toEqual(["node", "--enable-source-maps", "packages/shared/dist/migrate.js"]);
    for (const target of TARGETS) {
      const entry = effective(target, "CMD")!.exec!.at(-1)!;
      expect(existsSync(path.join(repoRoot, entry)), entry).toBe(true);
    }
  });

  it("copies into each image its own compiled code only (and the migrations into the migrator)", () => {
    for (const target of TARGETS) {
      const copied = stageChain(stages, target)
        .flatMap((s) => s.instructions.filter((i) => i.keyword === "COPY" && /--from=build/.test(i.args)))
        .map((i) => i.args.split(/\s+/).filter((a) => !a.startsWith("--"))[0]!);
      const own = target === "migrate" ? ["/app/packages/shared/dist", "/app/prisma"] : [`/app/services/${target}/dist`];
      const workspace = target === "migrate" ? "shared" : target;
      expect(copied.sort(), target).toEqual([`/pruned/${workspace}/json/`, ...own].sort());
    }
  });

  it("exposes the gateway's HTTP port and every service's ops port", () => {
    expect(exposed("gateway")).toEqual(expect.arrayContaining([8080, 9464]));
    // The gateway's own default PORT is the exposed one.
    expect(GatewayEnv.shape.PORT.parse(undefined)).toBe(8080);
    for (const svc of SERVICES.filter((s) => s !== "gateway")) {
      expect(exposed(svc), svc).toEqual([9464]);
    }
    expect(exposed("migrate")).toEqual([]);
  });

  it("keeps node_modules, .git and local data out of the build context", () => {
    const ignored = readFileSync(path.join(repoRoot, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    for (const pattern of ["node_modules", "**/node_modules", ".git", ".data", "services/*/src/generated"]) {
      expect(ignored, pattern).toContain(pattern);
    }
    // Nothing the build stage copies by name is ignored.
    const copiedFromContext = stages
      .flatMap((s) => s.instructions.filter((i) => i.keyword === "COPY" && !/--from=/.test(i.args)))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    for (const src of copiedFromContext.filter((s) => s !== ".")) {
      expect(existsSync(path.join(repoRoot, src)), src).toBe(true);
      expect(ignored.some((p) => src === p || src.startsWith(`${p}/`)), `${src} is ignored`).toBe(false);
    }
  });
});
