/**
 * Creates the database when missing, applies every service's migrations, and
 * records the deployment id in every schema (deployment.ts).
 * `npm run migrate` (a release's migration Job) and `npm start` both use it.
 */
import {
  ConfigError,
  DEFAULT_DATABASE_URL,
  ensureDatabase,
  migrate,
  migrationsDir,
  missingInProduction,
  recordDeployment,
  serviceDatabaseUrl,
} from "@whereabouts/shared";

export const SCHEMAS = [
  { schema: "identity", service: "gateway" },
  { schema: "catalog", service: "catalog" },
  { schema: "tracking", service: "tracking" },
  { schema: "reporting", service: "reporting" },
] as const;

export async function migrateAll(env: Record<string, string | undefined> = process.env, log = (m: string) => console.log(m)) {
  const missing = missingInProduction(["DATABASE_URL"], env);
  if (missing.length) throw new ConfigError(`Invalid configuration:\n  ${missing.map((k) => `${k}: required when NODE_ENV=production`).join("\n  ")}`);
  const results = [];
  const targets = SCHEMAS.map(({ schema, service }) => ({ schema, connectionString: serviceDatabaseUrl(service, env) || env.DATABASE_URL || DEFAULT_DATABASE_URL }));
  for (const { schema, connectionString } of targets) {
    await ensureDatabase(connectionString);
    results.push(await migrate({ connectionString, schema, migrationsDir: migrationsDir(schema), log }));
  }
  const deploymentId = await recordDeployment(targets);
  return Object.assign(results, { deploymentId });
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  migrateAll().then(
    (results) => {
      for (const r of results) console.log(`${r.schema}: ${r.applied.length} applied, ${r.skipped.length} already applied`);
      console.log(`deployment ${results.deploymentId}`);
    },
    (err: unknown) => {
      console.error(`migrate: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
