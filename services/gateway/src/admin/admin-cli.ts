/**
 * Admin CLI: `npm run -s admin -- <command>`. Prints one JSON object on stdout
 * and exits 0, or a message on stderr and exits non-zero, writing nothing.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { DEFAULT_DATABASE_URL, ensureDatabase, migrate, migrationsDir, toWireTimestamp, toWireTimestampOrNull } from "@whereabouts/shared";
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

export async function runAdminCommand(argv: string[], store: IdentityStore): Promise<unknown> {
  const [group, command, ...rest] = argv;
  const parse = (options: Record<string, { type: "string" | "boolean" }>) => {
    try {
      return parseArgs({ args: rest, options, strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  };
  if (group === "org" && command === "create") {
    const values = parse({ name: { type: "string" } });
    const name = typeof values.name === "string" ? values.name.trim() : "";
    if (!name) throw new UsageError("--name is required and must not be empty");
    const org = await store.createOrganization(name);
    return { id: org.id, name: org.name, created_at: toWireTimestamp(org.createdAt) };
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
    if (orgId !== null && !(await store.findOrganization(orgId))) throw new UsageError(`organization ${orgId} does not exist`);
    const scopesRaw = typeof values.scopes === "string" ? values.scopes.trim() : "";
    if (!scopesRaw) throw new UsageError("--scopes is required (comma-separated scopes, or all)");
    const scopes = scopesRaw === "all" ? [...SCOPES] : [...new Set(scopesRaw.split(",").map((s) => s.trim()))];
    const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
    if (unknown.length) throw new UsageError(`unknown scope(s): ${unknown.join(", ")}; known: ${SCOPES.join(", ")}`);
    let expiresAt: Date | null = null;
    if (values["expires-at"] !== undefined) {
      const raw = String(values["expires-at"]);
      const date = new Date(raw);
      if (!RFC3339.test(raw) || Number.isNaN(date.getTime())) throw new UsageError("--expires-at must be an RFC 3339 timestamp");
      expiresAt = date;
    }
    const rateLimit = values["rate-limit"] === undefined ? null : positiveInt("rate-limit", values["rate-limit"] as string);
    const name = typeof values.name === "string" ? values.name : null;
    const generated = generateApiKey();
    const row = await store.createApiKey({ orgId, name, prefix: generated.prefix, hash: generated.hash, scopes, rateLimit, expiresAt });
    return { id: row.id, key: generated.key, org_id: row.orgId, scopes: row.scopes, expires_at: toWireTimestampOrNull(row.expiresAt), rate_limit: row.rateLimit, name: row.name };
  }
  if (group === "key" && command === "revoke") {
    const values = parse({ id: { type: "string" } });
    const id = positiveInt("id", values.id as string | undefined);
    const existing = await store.findApiKey(id);
    if (!existing) throw new UsageError(`API key ${id} does not exist`);
    const row = existing.revokedAt ? existing : await store.revokeApiKey(id, new Date());
    return { id: row.id, revoked_at: toWireTimestamp(row.revokedAt!) };
  }
  if (group === "key" && command === "list") {
    const values = parse({ org: { type: "string" } });
    const orgId = values.org === undefined ? undefined : positiveInt("org", values.org as string);
    return { data: (await store.listApiKeys(orgId)).map(keyView) };
  }
  throw new UsageError(`unknown command: ${[group, command].filter(Boolean).join(" ") || "(none)"}\n${USAGE}`);
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  const env = z
    .object({ DATABASE_URL: z.string().default(DEFAULT_DATABASE_URL), GATEWAY_DATABASE_URL: z.string().optional() })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v)));
  const url = env.GATEWAY_DATABASE_URL ?? env.DATABASE_URL;
  const db = createIdentityClient(url);
  let code = 0;
  try {
    // The CLI works on a fresh machine too: its schema is created on demand.
    await ensureDatabase(url);
    await migrate({ connectionString: url, schema: "identity", migrationsDir: migrationsDir("identity") });
    const output = await runAdminCommand(process.argv.slice(2), createIdentityStore(db));
    process.stdout.write(`${JSON.stringify(output)}\n`);
  } catch (err) {
    process.stderr.write(`admin: ${err instanceof UsageError ? err.message : (err as Error).message}\n`);
    code = err instanceof UsageError ? 2 : 1;
  } finally {
    await db.$disconnect();
  }
  process.exit(code);
}
