/**
 * Creates the database when missing and applies every service's migrations.
 * `npm run migrate` (a release's migration Job) and `npm start` both use it.
 */
import { DEFAULT_DATABASE_URL, ensureDatabase, migrate, migrationsDir, serviceDatabaseUrl } from "@whereabouts/shared";

export const SCHEMAS = [
  { schema: "identity", service: "gateway" },
  { schema: "catalog", service: "catalog" },
  { schema: "tracking", service: "tracking" },
  { schema: "reporting", service: "reporting" },
] as const;

export async function migrateAll(env: Record<string, string | undefined> = process.env, log = (m: string) => console.log(m)) {
  const results = [];
  for (const { schema, service } of SCHEMAS) {
    const url = serviceDatabaseUrl(service, env) || env.DATABASE_URL || DEFAULT_DATABASE_URL;
    await ensureDatabase(url);
    results.push(await migrate({ connectionString: url, schema, migrationsDir: migrationsDir(schema), log }));
  }
  return results;
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  migrateAll().then(
    (results) => {
      for (const r of results) console.log(`${r.schema}: ${r.applied.length} applied, ${r.skipped.length} already applied`);
    },
    (err: unknown) => {
      console.error(`migrate: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}
