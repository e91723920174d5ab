/**
 * Which Postgres `npm start` uses:
 * - `EMBEDDED_POSTGRES=1`: an embedded one, listening where DATABASE_URL (or
 *   the default URL) points, which must be this machine;
 * - a DATABASE_URL (or a `<SERVICE>_DATABASE_URL`) that is set: that one, and
 *   an error when it does not answer, never a silent fallback;
 * - neither: the default address when a Postgres answers there, else an
 *   embedded one at that address, so the admin CLI's default finds it too.
 */
import path from "node:path";
import pg from "pg";
import { DEFAULT_DATABASE_URL } from "@whereabouts/shared";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "./embedded-postgres.ts";

const SERVICE_URLS = ["GATEWAY_DATABASE_URL", "CATALOG_DATABASE_URL", "TRACKING_DATABASE_URL", "REPORTING_DATABASE_URL"] as const;
/** Connection errors that mean "nobody there", as opposed to a server that answered (wrong password, no such database). */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOENT", "ECONNRESET"]);

/** undefined when a server answers at the URL's address; else why not. */
export async function postgresUnreachable(url: string): Promise<string | undefined> {
  const maintenance = new URL(url);
  maintenance.pathname = "/postgres";
  const client = new pg.Client({ connectionString: maintenance.toString(), connectionTimeoutMillis: 3000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return undefined;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if ((code && UNREACHABLE.has(code)) || /timeout/i.test((err as Error).message)) return (err as Error).message || code;
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const where = (url: string) => {
  const u = new URL(url);
  return `${u.hostname}:${u.port || "5432"}`;
};

export interface DatabaseChoice {
  /** DATABASE_URL for the migrator and the services (unchanged when the operator set one). */
  env: Record<string, string>;
  embedded?: EmbeddedPostgres;
}

export async function chooseDatabase(options: {
  env: Record<string, string | undefined>;
  embeddedRequested: boolean;
  dataDir: string;
  log: (m: string) => void;
}): Promise<DatabaseChoice> {
  const { env, log } = options;
  const explicit = env.DATABASE_URL || undefined;
  const url = explicit ?? DEFAULT_DATABASE_URL;

  const embed = async (reason: string): Promise<DatabaseChoice> => {
    const u = new URL(url);
    if (!["127.0.0.1", "localhost"].includes(u.hostname)) {
      throw new Error(`EMBEDDED_POSTGRES=1 runs PostgreSQL on this machine, but DATABASE_URL points at ${u.hostname}`);
    }
    const dataDir = path.join(options.dataDir, "pg");
    const database = decodeURIComponent(u.pathname.slice(1)) || "whereabouts";
    const embedded = await startEmbeddedPostgres({ dataDir, port: Number(u.port || "5432"), database, log });
    log(`${reason}: running an embedded PostgreSQL (embedded-postgres ${embedded.version}) at ${where(url)}, data in ${dataDir}`);
    return { env: { DATABASE_URL: embedded.url }, embedded };
  };

  if (options.embeddedRequested) return embed("EMBEDDED_POSTGRES=1");
  const overrides = SERVICE_URLS.filter((name) => env[name]);
  if (explicit || overrides.length) {
    for (const [name, value] of [["DATABASE_URL", explicit ?? url], ...overrides.map((n) => [n, env[n]!])] as const) {
      // Only the URLs some service uses: DATABASE_URL stops mattering once every schema has its own.
      if (name === "DATABASE_URL" && overrides.length === SERVICE_URLS.length) continue;
      const why = await postgresUnreachable(value);
      if (why) {
        throw new Error(
          `PostgreSQL does not answer at ${where(value)} (${name}): ${why}. ` +
            `Start it or correct ${name}; or unset it, or set EMBEDDED_POSTGRES=1, to let npm start run an embedded PostgreSQL.`,
        );
      }
    }
    return { env: {} };
  }
  if (!(await postgresUnreachable(url))) return { env: {} };
  return embed(`DATABASE_URL is unset and no PostgreSQL answers at ${where(url)}`);
}
