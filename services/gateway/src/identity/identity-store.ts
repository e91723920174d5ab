/** Identity data access: organizations and API keys (Prisma, schema `identity`). */
import { PrismaPg } from "@prisma/adapter-pg";
import type { Pool } from "@whereabouts/shared";
import { PrismaClient } from "../generated/identity/client.ts";

export type IdentityClient = InstanceType<typeof PrismaClient>;

/** From a URL, or from a pg Pool the caller watches (the client ends it on $disconnect). */
export function createIdentityClient(connection: string | Pool): IdentityClient {
  const adapter =
    typeof connection === "string"
      ? new PrismaPg({ connectionString: connection, max: 10 })
      : new PrismaPg(connection, { disposeExternalPool: true });
  return new PrismaClient({ adapter });
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

export function createIdentityStore(db: IdentityClient) {
  return {
    createOrganization: (name: string): Promise<OrganizationRow> => db.organization.create({ data: { name } }),
    findOrganization: (id: number): Promise<OrganizationRow | null> => db.organization.findUnique({ where: { id } }),
    createApiKey: (data: {
      orgId: number | null;
      name: string | null;
      prefix: string;
      hash: string;
      scopes: string[];
      rateLimit: number | null;
      expiresAt: Date | null;
    }): Promise<ApiKeyRow> => db.apiKey.create({ data }),
    findApiKeyByHash: (hash: string): Promise<ApiKeyRow | null> => db.apiKey.findUnique({ where: { hash } }),
    findApiKey: (id: number): Promise<ApiKeyRow | null> => db.apiKey.findUnique({ where: { id } }),
    revokeApiKey: (id: number, at: Date): Promise<ApiKeyRow> =>
      db.apiKey.update({ where: { id }, data: { revokedAt: at } }),
    listApiKeys: (orgId?: number): Promise<ApiKeyRow[]> =>
      db.apiKey.findMany({ where: orgId === undefined ? {} : { orgId }, orderBy: { id: "asc" } }),
    touchApiKey: async (id: number, at: Date): Promise<void> => {
      await db.apiKey.update({ where: { id }, data: { lastUsedAt: at } });
    },
  };
}
export type IdentityStore = ReturnType<typeof createIdentityStore>;
