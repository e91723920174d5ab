/**
 * The full results as JSON: bench-results/<timestamp>.json under the
 * repository (git-ignored), or the file --json names.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { repoRoot } from "@whereabouts/shared";

export function defaultResultsFile(startedAt: Date): string {
  const stamp = startedAt.toISOString().replace(/[:.]/g, "-");
  return path.join(repoRoot, "bench-results", `${stamp}.json`);
}

export async function writeResults(file: string, results: unknown): Promise<string> {
  const target = path.resolve(file);
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, `${JSON.stringify(results, null, 2)}\n`);
  return target;
}
