/** PATCH /api/v1/orgs/me/settings for the bench's organization (merge-patch); fails unless every field took. */
import type { BenchContext } from "./bench-context.ts";

export async function patchOrgSettings(ctx: Pick<BenchContext, "api">, patch: Record<string, number | null>): Promise<void> {
  const res = await fetch(`${ctx.api.baseUrl}/api/v1/orgs/me/settings`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${ctx.api.apiKey}`, "content-type": "application/merge-patch+json" },
    body: JSON.stringify(patch),
  });
  const text = await res.text();
  const data = res.status === 200 ? (JSON.parse(text) as { data?: Record<string, unknown> }).data : undefined;
  if (!data || Object.entries(patch).some(([k, v]) => data[k] !== v)) throw new Error(`PATCH settings ${JSON.stringify(patch)}: ${res.status} ${text}`);
}
