/**
 * Identity data access: organizations, API keys, users and sessions (schema
 * `identity`), on `pg` through sql.ts. The Prisma schema keeps the
 * migrations and typed models; Prisma's client is not loaded at runtime (it
 * cost the gateway about 100 MB of RSS, issue 9).
 */
import { createSqlClient, sqlExecute, sqlQuery, sqlQueryOne, sqlTransaction, type Pool, type Sql, type SqlClient } from "@whereabouts/shared";

/** The pool the store runs on; $disconnect ends it. */
export type IdentityClient = SqlClient;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createIdentityClient(connection: string | Pool): IdentityClient {
  return createSqlClient(connection, { max: 10 });
}

export interface OrganizationRow {
  id: number;
  name: string;
  createdAt: Date;
}

export interface ApiKeyRow {
  id: number;
  orgId: number | null;
  name: string | null;
  prefix: string;
  hash: string;
  scopes: string[];
  rateLimit: number | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  createdAt: Date;
}

/** What a new API key is created with: the rest of its row is the database's (id, times of use and revocation). */
export type NewApiKey = Pick<ApiKeyRow, "orgId" | "name" | "prefix" | "hash" | "scopes" | "rateLimit" | "expiresAt">;

export interface UserRow {
  id: number;
  orgId: number;
  email: string;
  passwordHash: string;
  scopes: string[];
  disabledAt: Date | null;
  createdAt: Date;
}

export interface SessionRow {
  id: number;
  userId: number;
  hash: string;
  csrfHash: string;
  expiresAt: Date;
  revokedAt: Date | null;
  createdAt: Date;
  user: UserRow;
}

const ORGANIZATION = `id, name, created_at AS "createdAt"`;
const API_KEY = `id, org_id AS "orgId", name, prefix, hash, scopes, rate_limit AS "rateLimit", expires_at AS "expiresAt",
  revoked_at AS "revokedAt", last_used_at AS "lastUsedAt", created_at AS "createdAt"`;
const USER = `id, org_id AS "orgId", email, password_hash AS "passwordHash", scopes, disabled_at AS "disabledAt", created_at AS "createdAt"`;
/** A session with its user (`s` and `u`), the user's columns prefixed `u_`. */
const SESSION_WITH_USER = `s.id, s.user_id AS "userId", s.hash, s.csrf_hash AS "csrfHash", s.expires_at AS "expiresAt",
  s.revoked_at AS "revokedAt", s.created_at AS "createdAt", u.id AS u_id, u.org_id AS u_org_id, u.email AS u_email,
  u.password_hash AS u_password_hash, u.scopes AS u_scopes, u.disabled_at AS u_disabled_at, u.created_at AS u_created_at`;

interface SessionJoinRow extends Omit<SessionRow, "user"> {
  u_id: number;
  u_org_id: number;
  u_email: string;
  u_password_hash: string;
  u_scopes: string[];
  u_disabled_at: Date | null;
  u_created_at: Date;
}

function sessionOf(row: SessionJoinRow): SessionRow {
  const { u_id, u_org_id, u_email, u_password_hash, u_scopes, u_disabled_at, u_created_at, ...session } = row;
  return {
    ...session,
    user: { id: u_id, orgId: u_org_id, email: u_email, passwordHash: u_password_hash, scopes: u_scopes, disabledAt: u_disabled_at, createdAt: u_created_at },
  };
}

/** The row an UPDATE ... RETURNING changed; a missing row is an error, as Prisma's update made it. */
function updated<T>(row: T | undefined, what: string): T {
  if (!row) throw new Error(`${what} does not exist`);
  return row;
}

async function findSession(db: Sql, where: string, value: unknown): Promise<SessionRow | null> {
  const row = await sqlQueryOne<SessionJoinRow>(
    db,
    `SELECT ${SESSION_WITH_USER} FROM identity.sessions s JOIN identity.users u ON u.id = s.user_id WHERE ${where} = $1`,
    [value],
  );
  return row ? sessionOf(row) : null;
}

export function createIdentityStore(client: IdentityClient) {
  const db = client.pool;
  return {
    createUser: async (data: { orgId: number; email: string; passwordHash: string; scopes: string[] }): Promise<UserRow> =>
      (await sqlQueryOne<UserRow>(
        db,
        `INSERT INTO identity.users (org_id, email, password_hash, scopes) VALUES ($1, $2, $3, $4) RETURNING ${USER}`,
        [data.orgId, data.email, data.passwordHash, data.scopes],
      ))!,
    findUser: async (id: number): Promise<UserRow | null> => (await sqlQueryOne<UserRow>(db, `SELECT ${USER} FROM identity.users WHERE id = $1`, [id])) ?? null,
    findUserByEmail: async (email: string): Promise<UserRow | null> =>
      (await sqlQueryOne<UserRow>(db, `SELECT ${USER} FROM identity.users WHERE email = $1`, [email])) ?? null,
    listUsers: (orgId?: number): Promise<UserRow[]> =>
      orgId === undefined
        ? sqlQuery<UserRow>(db, `SELECT ${USER} FROM identity.users ORDER BY id`)
        : sqlQuery<UserRow>(db, `SELECT ${USER} FROM identity.users WHERE org_id = $1 ORDER BY id`, [orgId]),
    /** Disables the user and ends every session of theirs, in one transaction. */
    disableUser: (id: number, at: Date): Promise<UserRow> =>
      sqlTransaction(db, async (tx) => {
        const user = updated(
          await sqlQueryOne<UserRow>(tx, `UPDATE identity.users SET disabled_at = $2 WHERE id = $1 RETURNING ${USER}`, [id, at]),
          `user ${id}`,
        );
        await sqlExecute(tx, `UPDATE identity.sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL`, [id, at]);
        return user;
      }),
    /** The new session with its user, in one statement. */
    createSession: async (data: { userId: number; hash: string; csrfHash: string; expiresAt: Date }): Promise<SessionRow> => {
      const row = await sqlQueryOne<SessionJoinRow>(
        db,
        `WITH s AS (INSERT INTO identity.sessions (user_id, hash, csrf_hash, expires_at) VALUES ($1, $2, $3, $4) RETURNING *)
         SELECT ${SESSION_WITH_USER} FROM s JOIN identity.users u ON u.id = s.user_id`,
        [data.userId, data.hash, data.csrfHash, data.expiresAt],
      );
      return sessionOf(row!);
    },
    findSessionByHash: (hash: string): Promise<SessionRow | null> => findSession(db, "s.hash", hash),
    revokeSession: async (id: number, at: Date): Promise<void> => {
      await sqlExecute(db, `UPDATE identity.sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, [id, at]);
    },
    /** Failed sign-ins for this email since `since`. */
    countLoginFailures: async (email: string, since: Date): Promise<number> =>
      (await sqlQueryOne<{ n: number }>(db, `SELECT count(*)::int AS n FROM identity.login_failures WHERE email = $1 AND failed_at >= $2`, [email, since]))!.n,
    recordLoginFailure: async (email: string, at: Date): Promise<void> => {
      await sqlExecute(db, `INSERT INTO identity.login_failures (email, failed_at) VALUES ($1, $2)`, [email, at]);
    },
    createOrganization: async (name: string): Promise<OrganizationRow> =>
      (await sqlQueryOne<OrganizationRow>(db, `INSERT INTO identity.organizations (name) VALUES ($1) RETURNING ${ORGANIZATION}`, [name]))!,
    findOrganization: async (id: number): Promise<OrganizationRow | null> =>
      (await sqlQueryOne<OrganizationRow>(db, `SELECT ${ORGANIZATION} FROM identity.organizations WHERE id = $1`, [id])) ?? null,
    createApiKey: async (data: NewApiKey): Promise<ApiKeyRow> =>
      (await sqlQueryOne<ApiKeyRow>(
        db,
        `INSERT INTO identity.api_keys (org_id, name, prefix, hash, scopes, rate_limit, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${API_KEY}`,
        [data.orgId, data.name, data.prefix, data.hash, data.scopes, data.rateLimit, data.expiresAt],
      ))!,
    findApiKeyByHash: async (hash: string): Promise<ApiKeyRow | null> =>
      (await sqlQueryOne<ApiKeyRow>(db, `SELECT ${API_KEY} FROM identity.api_keys WHERE hash = $1`, [hash])) ?? null,
    findApiKey: async (id: number): Promise<ApiKeyRow | null> =>
      (await sqlQueryOne<ApiKeyRow>(db, `SELECT ${API_KEY} FROM identity.api_keys WHERE id = $1`, [id])) ?? null,
    revokeApiKey: async (id: number, at: Date): Promise<ApiKeyRow> =>
      updated(await sqlQueryOne<ApiKeyRow>(db, `UPDATE identity.api_keys SET revoked_at = $2 WHERE id = $1 RETURNING ${API_KEY}`, [id, at]), `api key ${id}`),
    listApiKeys: (orgId?: number): Promise<ApiKeyRow[]> =>
      orgId === undefined
        ? sqlQuery<ApiKeyRow>(db, `SELECT ${API_KEY} FROM identity.api_keys ORDER BY id`)
        : sqlQuery<ApiKeyRow>(db, `SELECT ${API_KEY} FROM identity.api_keys WHERE org_id = $1 ORDER BY id`, [orgId]),
    touchApiKey: async (id: number, at: Date): Promise<void> => {
      await sqlExecute(db, `UPDATE identity.api_keys SET last_used_at = $2 WHERE id = $1`, [id, at]);
    },
  };
}
export type IdentityStore = ReturnType<typeof createIdentityStore>;
