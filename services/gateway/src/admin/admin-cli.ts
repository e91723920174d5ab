/**
 * Admin CLI: `npm run -s admin -- <command>`. Prints one JSON object on stdout
 * and exits 0, or a message on stderr and exits non-zero, writing nothing.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { pathToFileURL } from "node:url";
import {
  DEFAULT_DATABASE_URL,
  ensureDatabase,
  migrate,
  migrationsDir,
  parseConfig,
  toWireTimestamp,
  toWireTimestampOrNull,
} from "@whereabouts/shared";
import { generateApiKey } from "../identity/api-key.ts";
import { createIdentityClient, createIdentityStore, type ApiKeyRow, type IdentityStore } from "../identity/identity-store.ts";
import { SCOPES } from "../routes/route-table.ts";

export class UsageError extends Error {
  override readonly name = "UsageError";
}

const USAGE = `usage:
  admin org create --name <name>
  admin key create (--org <org_id> | --no-org) --scopes <comma-separated scopes or all> [--expires-at <rfc3339>] [--rate-limit <n>] [--name <label>]
  admin key revoke --id <key_id>
  admin key list [--org <org_id>]`;

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function positiveInt(name: string, raw: string | undefined): number {
  if (raw === undefined) throw new UsageError(`--${name} is required`);
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 2147483647) {
    throw new UsageError(`--${name} must be a positive integer`);
  }
  return Number(raw);
}

const keyView = (row: ApiKeyRow) => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  org_id: row.orgId,
  scopes: row.scopes,
  rate_limit: row.rateLimit,
  expires_at: toWireTimestampOrNull(row.expiresAt),
  revoked_at: toWireTimestampOrNull(row.revokedAt),
  last_used_at: toWireTimestampOrNull(row.lastUsedAt),
  created_at: toWireTimestamp(row.createdAt),
});

export type AdminCommand =
  | { command: "org create"; name: string }
  | {
      command: "key create";
      orgId: number | null;
      scopes: string[];
      expiresAt: Date | null;
      rateLimit: number | null;
      name: string | null;
    }
  | { command: "key revoke"; id: number }
  | { command: "key list"; orgId: number | undefined };

/** RFC 3339 date-time that names a real instant (no 30 February). */
function parseTimestamp(raw: string): Date | undefined {
  const match = RFC3339.exec(raw);
  if (!match) return undefined;
  const [year, month, day] = raw.slice(0, 10).split("-").map(Number) as [number, number, number];
  const calendar = new Date(Date.UTC(year, month - 1, day));
  if (calendar.getUTCFullYear() !== year || calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) return undefined;
  const date = new Date(raw);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/**
 * Checks the arguments without touching the database: a bad command line
 * fails here, before anything is connected, created or written.
 */
export function parseAdminArgs(argv: string[]): AdminCommand {
  const [group, command, ...rest] = argv;
  const parse = (options: Record<string, { type: "string" | "boolean" }>) => {
    try {
      return parseArgs({ args: rest, options, strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\n${USAGE}`);
    }
  };
  if (group === "org" && command === "create") {
    const values = parse({ name: { type: "string" } });
    const name = typeof values.name === "string" ? values.name.trim() : "";
    if (!name) throw new UsageError("--name is required and must not be empty");
    return { command: "org create", name };
  }
  if (group === "key" && command === "create") {
    const values = parse({
      org: { type: "string" },
      "no-org": { type: "boolean" },
      scopes: { type: "string" },
      "expires-at": { type: "string" },
      "rate-limit": { type: "string" },
      name: { type: "string" },
    });
    if (values.org !== undefined && values["no-org"]) throw new UsageError("--org and --no-org are mutually exclusive");
    if (values.org === undefined && !values["no-org"]) throw new UsageError("--org <org_id> or --no-org is required");
    const orgId = values["no-org"] ? null : positiveInt("org", values.org as string);
    const scopesRaw = typeof values.scopes === "string" ? values.scopes.trim() : "";
    if (!scopesRaw) throw new UsageError("--scopes is required (comma-separated scopes, or all)");
    const scopes = scopesRaw === "all" ? [...SCOPES] : [...new Set(scopesRaw.split(",").map((s) => s.trim()))];
    const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
    if (unknown.length) {
      throw new UsageError(`unknown scope(s): ${unknown.map((s) => JSON.stringify(s)).join(", ")}; known: ${SCOPES.join(", ")}, or all`);
    }
    let expiresAt: Date | null = null;
    if (values["expires-at"] !== undefined) {
      const parsed = parseTimestamp(String(values["expires-at"]));
      if (!parsed) throw new UsageError("--expires-at must be an RFC 3339 timestamp, e.g. 2027-01-31T00:00:00Z");
      expiresAt = parsed;
    }
    const rateLimit = values["rate-limit"] === undefined ? null : positiveInt("rate-limit", values["rate-limit"] as string);
    const name = typeof values.name === "string" ? values.name : null;
    return { command: "key create", orgId, scopes, expiresAt, rateLimit, name };
  }
  if (group === "key" && command === "revoke") {
    const values = parse({ id: { type: "string" } });
    return { command: "key revoke", id: positiveInt("id", values.id as string | undefined) };
  }
  if (group === "key" && command === "list") {
    const values = parse({ org: { type: "string" } });
    return { command: "key list", orgId: values.org === undefined ? undefined : positiveInt("org", values.org as string) };
  }
  throw new UsageError(`unknown command: ${[group, command].filter(Boolean).join(" ") || "(none)"}\n${USAGE}`);
}

/** Runs a parsed command; references to missing rows are usage errors too. */
export async function executeAdminCommand(cmd: AdminCommand, store: IdentityStore): Promise<unknown> {
  switch (cmd.command) {
    case "org create": {
      const org = await store.createOrganization(cmd.name);
      return { id: org.id, name: org.name, created_at: toWireTimestamp(org.createdAt) };
    }
    case "key create": {
      if (cmd.orgId !== null && !(await store.findOrganization(cmd.orgId))) {
        throw new UsageError(`organization ${cmd.orgId} does not exist`);
      }
      const generated = generateApiKey();
      const row = await store.createApiKey({
        orgId: cmd.orgId,
        name: cmd.name,
        prefix: generated.prefix,
        hash: generated.hash,
        scopes: cmd.scopes,
        rateLimit: cmd.rateLimit,
        expiresAt: cmd.expiresAt,
      });
      return {
        id: row.id,
        key: generated.key,
        org_id: row.orgId,
        scopes: row.scopes,
        expires_at: toWireTimestampOrNull(row.expiresAt),
        rate_limit: row.rateLimit,
        name: row.name,
      };
    }
    case "key revoke": {
      const existing = await store.findApiKey(cmd.id);
      if (!existing) throw new UsageError(`API key ${cmd.id} does not exist`);
      // Revoking twice keeps the first revocation time.
      const row = existing.revokedAt ? existing : await store.revokeApiKey(cmd.id, new Date());
      return { id: row.id, revoked_at: toWireTimestamp(row.revokedAt!) };
    }
    case "key list":
      return { data: (await store.listApiKeys(cmd.orgId)).map(keyView) };
  }
}

export async function runAdminCommand(argv: string[], store: IdentityStore): Promise<unknown> {
  return executeAdminCommand(parseAdminArgs(argv), store);
}

const isMain = process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  let code = 0;
  try {
    const command = parseAdminArgs(process.argv.slice(2));
    const env = parseConfig(
      z.object({ DATABASE_URL: z.string().min(1).default(DEFAULT_DATABASE_URL), GATEWAY_DATABASE_URL: z.string().min(1).optional() }),
    );
    const url = env.GATEWAY_DATABASE_URL ?? env.DATABASE_URL;
    // The CLI works on a fresh machine too: database and schema are created on demand.
    await ensureDatabase(url);
    await migrate({ connectionString: url, schema: "identity", migrationsDir: migrationsDir("identity") });
    const db = createIdentityClient(url);
    try {
      const output = await executeAdminCommand(command, createIdentityStore(db));
      process.stdout.write(`${JSON.stringify(output)}\n`);
    } finally {
      await db.$disconnect();
    }
  } catch (err) {
    process.stderr.write(`admin: ${(err as Error).message}\n`);
    code = err instanceof UsageError ? 2 : 1;
  }
  process.exit(code);
}
