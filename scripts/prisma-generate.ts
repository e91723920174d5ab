/**
 * Generates each service's Prisma client into its own folder. Prisma's native
 * schema engine cannot be downloaded on these machines and generate does not
 * use it, so any existing file satisfies the CLI's check.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const schemas = ["identity", "catalog", "tracking", "reporting"]
  .map((name) => path.join(root, "prisma", name, "schema.prisma"))
  .filter((file) => existsSync(file));

const engine = process.env.PRISMA_SCHEMA_ENGINE_BINARY;
const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: engine && existsSync(engine) ? engine : process.execPath,
  PRISMA_HIDE_UPDATE_MESSAGE: "1",
};
const cli = path.join(root, "node_modules", "prisma", "build", "index.js");
for (const schema of schemas) {
  execFileSync(process.execPath, [cli, "generate", "--schema", schema], { cwd: root, env, stdio: "inherit" });
}
