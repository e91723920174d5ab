/**
 * `npm run build`: each service's entry points compiled to JavaScript in its
 * own `dist/` (esbuild, ES modules, source maps), so production runs
 * `node dist/main.js` with no TypeScript loader in memory. The workspace's own
 * code (`@whereabouts/shared`, the generated Prisma clients) is bundled in;
 * npm packages stay imports, installed from the service's own dependencies.
 *
 * Every bundle sits three levels below the repository root
 * (`services/<name>/dist`, `packages/shared/dist`), as the sources do, so
 * `repoRoot` (paths.ts) still finds `prisma/<service>/migrations`.
 *
 * `npm run -s build -- <name>...` builds only those. `npm start` builds
 * first (about a second), so a bundle never runs older than its sources.
 */
import { build, type Plugin } from "esbuild";
import { cpSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Entry points per workspace: what production runs. */
export const BUNDLES: Record<string, { dir: string; entries: Record<string, string>; files?: Record<string, string> }> = {
  gateway: {
    dir: "services/gateway",
    entries: { main: "src/main.ts", "admin-cli": "src/admin/admin-cli.ts" },
    // The handheld page, served as is (handheld-routes.ts looks next to the bundle first).
    files: { "src/handheld/page": "handheld" },
  },
  catalog: { dir: "services/catalog", entries: { main: "src/main.ts" } },
  tracking: { dir: "services/tracking", entries: { main: "src/main.ts" } },
  reporting: { dir: "services/reporting", entries: { main: "src/main.ts", "rebuild-cli": "src/rebuild-cli.ts" } },
  /** The migrator (the `migrate` image and job): shared code and the migrations folder only. */
  migrate: { dir: "packages/shared", entries: { migrate: "../../scripts/migrate.ts" } },
};

/** npm packages stay external; workspace packages (TypeScript sources) are compiled in. */
const externalPackages: Plugin = {
  name: "external-packages",
  setup(b) {
    // Bare specifiers only: relative and absolute paths are our sources.
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith("@whereabouts/") ? undefined : { path: args.path, external: true }));
  },
};

export async function buildBundles(names: string[] = Object.keys(BUNDLES)): Promise<string[]> {
  const written: string[] = [];
  for (const name of names) {
    const bundle = BUNDLES[name];
    if (!bundle) throw new Error(`unknown bundle "${name}"; known: ${Object.keys(BUNDLES).join(", ")}`);
    const outdir = path.join(root, bundle.dir, "dist");
    const entryPoints = Object.fromEntries(
      Object.entries(bundle.entries).map(([out, src]) => [out, path.join(root, bundle.dir, src)]),
    );
    await build({
      entryPoints,
      outdir,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      sourcemap: true,
      // Stack traces point at the TypeScript sources.
      sourcesContent: false,
      plugins: [externalPackages],
      logLevel: "warning",
      // ES modules have no require(); a bundled CommonJS helper would need one.
      banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    });
    for (const [from, to] of Object.entries(bundle.files ?? {})) {
      cpSync(path.join(root, bundle.dir, from), path.join(outdir, to), { recursive: true });
    }
    written.push(...Object.keys(entryPoints).map((out) => path.join(bundle.dir, "dist", `${out}.js`)));
  }
  return written;
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  const names = process.argv.slice(2).filter((a) => !a.startsWith("-"));
  const started = performance.now();
  buildBundles(names.length ? names : undefined).then(
    (files) => console.error(`built ${files.length} bundles in ${Math.round(performance.now() - started)} ms: ${files.join(", ")}`),
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
