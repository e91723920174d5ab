/**
 * The full results as JSON: bench-results/<timestamp>.json under the
 * repository (git-ignored), or the file --json names; the services' logs
 * beside it.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { repoRoot } from "@whereabouts/shared";

/** `kind` prefixes the name (`chaos-`, `soak-`); the benchmark's files have none. */
export function defaultResultsFile(startedAt: Date, kind?: string): string {
  const stamp = startedAt.toISOString().replace(/[:.]/g, "-");
  return path.join(repoRoot, "bench-results", `${kind ? `${kind}-` : ""}${stamp}.json`);
}

export async function writeResults(file: string, results: unknown): Promise<string> {
  const target = path.resolve(file);
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, `${JSON.stringify(results, null, 2)}\n`);
  return target;
}

/** The services' log file beside the results: `<results>.services.log`. */
export const serviceLogFile = (resultsFile: string) => `${path.resolve(resultsFile).replace(/\.json$/, "")}.services.log`;

/** Lines of the services' pino logs at error level or above, and at warn. */
export async function countLogLevels(file: string): Promise<{ errors: number; warnings: number }> {
  let text = "";
  try {
    text = await readFile(file, "utf8");
  } catch {
    return { errors: 0, warnings: 0 };
  }
  let errors = 0;
  let warnings = 0;
  for (const line of text.split("\n")) {
    const level = /"level":(\d+)/.exec(line)?.[1];
    if (level === undefined) continue;
    if (Number(level) >= 50) errors++;
    else if (Number(level) === 40) warnings++;
  }
  return { errors, warnings };
}
