/**
 * Admin CLI: `npm run -s admin -- <command>`. Prints one JSON object on stdout
 * and exits 0, or a message on stderr and exits non-zero, writing nothing.
 * `assets import` (asset-import.ts) also shows its progress before that
 * object, the finished job, and exits 1 when the job failed.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { pathToFileURL } from "node:url";
import {
  connectNats,
  createLogger,
  DEFAULT_DATABASE_URL,
  DEFAULT_NATS_URL,
  ensureDatabase,
  migrate,
  migrationsDir,
  parseConfig,
  parseInstant,
  SCOPES,
  toWireTimestamp,
  toWireTimestampOrNull,
} from "@whereabouts/shared";
import { generateApiKey } from "../identity/api-key.ts";
import { hashPassword, isEmail, MIN_PASSWORD_LENGTH, normalizeEmail } from "../identity/credentials.ts";
import { createIdentityClient, createIdentityStore, type ApiKeyRow, type IdentityStore, type UserRow } from "../identity/identity-store.ts";
import { ImportFailed, importAssets, type AssetImportCommand } from "./asset-import.ts";

export class UsageError extends Error {
  override readonly name = "UsageError";
}

const USAGE = `usage:
  admin org create --name <name>
  admin key create (--org <org_id> | --no-org) --scopes <comma-separated scopes or all> [--expires-at <rfc3339>] [--rate-limit <n>] [--name <label>]
  admin key revoke --id <key_id>
  admin key list [--org <org_id>]
  admin user create --org <org_id> --email <email> --scopes <comma-separated scopes or all> --password-stdin
  admin user disable --id <user_id>
  admin user list [--org <org_id>]
  admin assets import --org <org_id> <file.csv> [--mode upsert|create] [--on-error abort|skip]`;


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
  | { command: "key list"; orgId: number | undefined }
  | { command: "user create"; orgId: number; email: string; scopes: string[] }
  | { command: "user disable"; id: number }
  | { command: "user list"; orgId: number | undefined }
  | AssetImportCommand;

const userView = (row: UserRow) => ({
  id: row.id,
  org_id: row.orgId,
  email: row.email,
  scopes: row.scopes,
  disabled_at: toWireTimestampOrNull(row.disabledAt),
  created_at: toWireTimestamp(row.createdAt),
});

function parseScopes(raw: unknown): string[] {
  const scopesRaw = typeof raw === "string" ? raw.trim() : "";
  if (!scopesRaw) throw new UsageError("--scopes is required (comma-separated scopes, or all)");
  const scopes = scopesRaw === "all" ? [...SCOPES] : [...new Set(scopesRaw.split(",").map((s) => s.trim()))];
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length) {
    throw new UsageError(`unknown scope(s): ${unknown.map((s) => JSON.stringify(s)).join(", ")}; known: ${SCOPES.join(", ")}, or all`);
  }
  return scopes;
}

/** RFC 3339 date-time that names a real instant (no 30 February). */
function parseTimestamp(raw: string): Date | undefined {
  const instant = parseInstant(raw);
  if (!instant) return undefined;
  const date = new Date(instant.seconds * 1000 + Math.floor(instant.nanos / 1_000_000));
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
    const scopes = parseScopes(values.scopes);
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
  if (group === "user" && command === "create") {
    const values = parse({ org: { type: "string" }, email: { type: "string" }, scopes: { type: "string" }, "password-stdin": { type: "boolean" } });
    const orgId = positiveInt("org", values.org as string | undefined);
    const email = typeof values.email === "string" ? normalizeEmail(values.email) : "";
    if (!isEmail(email)) throw new UsageError("--email must be an email address");
    const scopes = parseScopes(values.scopes);
    if (!values["password-stdin"]) throw new UsageError("--password-stdin is required: the password is the first line of stdin");
    return { command: "user create", orgId, email, scopes };
  }
  if (group === "user" && command === "disable") {
    const values = parse({ id: { type: "string" } });
    return { command: "user disable", id: positiveInt("id", values.id as string | undefined) };
  }
  if (group === "user" && command === "list") {
    const values = parse({ org: { type: "string" } });
    return { command: "user list", orgId: values.org === undefined ? undefined : positiveInt("org", values.org as string) };
  }
  if (group === "assets" && command === "import") {
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: { org: { type: "string" }, mode: { type: "string" }, "on-error": { type: "string" } },
        strict: true,
        allowPositionals: true,
      });
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\n${USAGE}`);
    }
    const { values, positionals } = parsed;
    const orgId = positiveInt("org", values.org);
    if (positionals.length !== 1) throw new UsageError(`one CSV file is required\n${USAGE}`);
    const mode = values.mode ?? "upsert";
    if (mode !== "upsert" && mode !== "create") throw new UsageError("--mode must be upsert or create");
    const onError = values["on-error"] ?? "abort";
    if (onError !== "abort" && onError !== "skip") throw new UsageError("--on-error must be abort or skip");
    return { command: "assets import", orgId, file: positionals[0]!, mode, onError };
  }
  throw new UsageError(`unknown command: ${[group, command].filter(Boolean).join(" ") || "(none)"}\n${USAGE}`);
}

/** The password of `user create --password-stdin`: the first line of stdin, without its line ending. */
export function passwordFromStdin(input: string): string {
  const line = input.split(/\r?\n/)[0] ?? "";
  if (line.length < MIN_PASSWORD_LENGTH) throw new UsageError(`the password (first line of stdin) must have at least ${MIN_PASSWORD_LENGTH} characters`);
  return line;
}

/** Runs a parsed command; references to missing rows are usage errors too. `stdin`: what `--password-stdin` reads. */
export async function executeAdminCommand(cmd: AdminCommand, store: IdentityStore, stdin: () => Promise<string> = async () => ""): Promise<unknown> {
  switch (cmd.command) {
    case "user create": {
      if (!(await store.findOrganization(cmd.orgId))) throw new UsageError(`organization ${cmd.orgId} does not exist`);
      const password = passwordFromStdin(await stdin());
      if (await store.findUserByEmail(cmd.email)) throw new UsageError(`a user with email ${cmd.email} already exists`);
      const row = await store.createUser({ orgId: cmd.orgId, email: cmd.email, passwordHash: await hashPassword(password), scopes: cmd.scopes });
      const { disabled_at: _disabled, ...view } = userView(row);
      return view;
    }
    case "user disable": {
      const existing = await store.findUser(cmd.id);
      if (!existing) throw new UsageError(`user ${cmd.id} does not exist`);
      // Disabling twice keeps the first time.
      const row = existing.disabledAt ? existing : await store.disableUser(cmd.id, new Date());
      return { id: row.id, disabled_at: toWireTimestamp(row.disabledAt!) };
    }
    case "user list":
      return { data: (await store.listUsers(cmd.orgId)).map(userView) };
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
    case "assets import":
      // Needs the broker too: run by `main` below through importAssets.
      throw new UsageError("assets import runs only from the command line");
  }
}

export async function runAdminCommand(argv: string[], store: IdentityStore, stdin?: string): Promise<unknown> {
  return executeAdminCommand(parseAdminArgs(argv), store, async () => stdin ?? "");
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write("password: ");
  let text = "";
  for await (const chunk of process.stdin) {
    text += String(chunk);
    // The first line is all we need: a terminal need not send end-of-file.
    if (text.includes("\n")) break;
  }
  return text;
}

const isMain = process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  let code = 0;
  try {
    const command = parseAdminArgs(process.argv.slice(2));
    const env = parseConfig(
      z.object({
        DATABASE_URL: z.string().min(1).default(DEFAULT_DATABASE_URL),
        GATEWAY_DATABASE_URL: z.string().min(1).optional(),
        NATS_URL: z.string().min(1).default(DEFAULT_NATS_URL),
        NATS_USER: z.string().min(1).optional(),
        NATS_PASSWORD: z.string().min(1).optional(),
      }),
    );
    const url = env.GATEWAY_DATABASE_URL ?? env.DATABASE_URL;
    // The CLI works on a fresh machine too: database and schema are created on demand.
    await ensureDatabase(url);
    await migrate({ connectionString: url, schema: "identity", migrationsDir: migrationsDir("identity") });
    const db = createIdentityClient(url);
    try {
      if (command.command === "assets import") {
        if (!(await createIdentityStore(db).findOrganization(command.orgId))) throw new UsageError(`organization ${command.orgId} does not exist`);
        const nc = await connectNats({ url: env.NATS_URL, name: "admin", logger: createLogger("admin", "silent"), user: env.NATS_USER, pass: env.NATS_PASSWORD });
        try {
          const job = await importAssets(nc, command, { tty: process.stdout.isTTY === true, write: (text) => process.stdout.write(text) });
          process.stdout.write(`${JSON.stringify(job)}\n`);
          if (job.status !== "succeeded") throw new ImportFailed(`job ${job.id} failed: ${job.failed_rows} row(s) refused (on_error=${command.onError})`);
        } finally {
          await nc.close();
        }
      } else {
        const output = await executeAdminCommand(command, createIdentityStore(db), readStdin);
        process.stdout.write(`${JSON.stringify(output)}\n`);
      }
    } finally {
      await db.$disconnect();
    }
  } catch (err) {
    process.stderr.write(`admin: ${(err as Error).message}\n`);
    code = err instanceof UsageError ? 2 : 1;
  }
  process.exit(code);
}
