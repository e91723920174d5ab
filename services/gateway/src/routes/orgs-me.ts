/** `orgs.me` (GET /api/v1/orgs/me): the one operation the gateway answers itself, from its identity store. */
import { notFound, toWireTimestamp } from "@whereabouts/shared";
import type { IdentityStore } from "../identity/identity-store.ts";
import type { LocalOperation } from "./forward-route.ts";

export function orgsMe(identity: Pick<IdentityStore, "findOrganization">): LocalOperation {
  return async (principal) => {
    const org = await identity.findOrganization(principal.org_id!);
    if (!org) throw notFound("Organization not found");
    const body = { data: { id: org.id, name: org.name, created_at: toWireTimestamp(org.createdAt) } };
    return { status: 200, headers: {}, payload: Buffer.from(JSON.stringify(body)) };
  };
}
