import { fileURLToPath } from "node:url";
import path from "node:path";

/** The repository root, where `prisma/<service>/migrations` live. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const migrationsDir = (service: string) => path.join(repoRoot, "prisma", service, "migrations");
