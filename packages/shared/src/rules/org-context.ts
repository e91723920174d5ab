/**
 * A principal without an organization (spec: rule 5 of principals). GET
 * /api/v1/orgs/me answers 422 missing_org_context; the spec lets other
 * operations answer 403 or 404, and this stack answers 403 forbidden for all
 * of them. The settings under /api/v1/orgs/me (EXTENSIONS.md section 5) are
 * the same resource's, so they answer 422 too.
 */
import { AppError, forbidden } from "../errors.ts";

const NO_ORG_MESSAGE = "The API key has no organization context";

/** The error for a principal without an organization on `resource`. */
export const noOrgError = (resource: "orgs/me" | "other"): AppError =>
  resource === "orgs/me" ? new AppError("missing_org_context", NO_ORG_MESSAGE) : forbidden(NO_ORG_MESSAGE);

/** The principal's organization, or the spec's answer when it has none. */
export function requireOrg(principal: { org_id: number | null }, resource: "orgs/me" | "other" = "other"): number {
  if (principal.org_id === null) throw noOrgError(resource);
  return principal.org_id;
}
