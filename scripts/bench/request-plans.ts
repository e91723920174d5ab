/**
 * What the load runner sends, as plain data a parent can pass to the runner
 * process: each plan names a request shape and the ids it draws from, and
 * becomes, inside the runner, a source of one request after another (random
 * ids, unique keys for writes).
 */

export type RequestPlan =
  /** The baseline server's primary-key select. */
  | { kind: "baseline-get"; assetIds: number[] }
  | { kind: "get-asset"; assetIds: number[] }
  /** Pages at random offsets among the first `pages`. */
  | { kind: "list-assets"; limit: number; pages: number }
  | { kind: "search-assets"; q: string; limit: number }
  /** Unique external_key and tag value per request, prefixed by `runId`. */
  | { kind: "create-asset"; runId: string }
  | { kind: "report" }
  | { kind: "history"; assetId: number }
  /** Soak: GET by id 50%, list 20%, PATCH 20%, tag attach 10%. */
  | { kind: "soak-mix"; assetIds: number[]; runId: string };

export interface PlannedRequest {
  method: "GET" | "POST" | "PATCH";
  path: string;
  body?: string;
  contentType?: string;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

export function createRequestSource(plan: RequestPlan): () => PlannedRequest {
  let n = 0;
  // Unique across jobs of one run: the runner process may serve several.
  const unique = () => `${Date.now().toString(36)}-${process.pid}-${++n}`;
  switch (plan.kind) {
    case "baseline-get":
      return () => ({ method: "GET", path: `/assets/${pick(plan.assetIds)}` });
    case "get-asset":
      return () => ({ method: "GET", path: `/api/v1/assets/${pick(plan.assetIds)}` });
    case "list-assets":
      return () => ({ method: "GET", path: `/api/v1/assets?limit=${plan.limit}&offset=${plan.limit * Math.floor(Math.random() * plan.pages)}` });
    case "search-assets":
      return () => ({ method: "GET", path: `/api/v1/assets?q=${encodeURIComponent(plan.q)}&limit=${plan.limit}` });
    case "create-asset":
      return () => {
        const id = unique();
        return {
          method: "POST",
          path: "/api/v1/assets",
          contentType: "application/json",
          body: JSON.stringify({
            name: `Bench created ${id}`,
            external_key: `BC-${plan.runId}-${id}`,
            tags: [{ tag_type: "rfid", value: `BENCH-NEW-${plan.runId}-${id}` }],
          }),
        };
      };
    case "report":
      return () => ({ method: "GET", path: "/api/v1/reports/asset-locations" });
    case "history":
      return () => ({ method: "GET", path: `/api/v1/assets/${plan.assetId}/history` });
    case "soak-mix":
      return () => {
        const roll = Math.random();
        const id = pick(plan.assetIds);
        if (roll < 0.5) return { method: "GET", path: `/api/v1/assets/${id}` };
        if (roll < 0.7) return { method: "GET", path: `/api/v1/assets?limit=50&offset=${50 * Math.floor(Math.random() * 5)}` };
        if (roll < 0.9) {
          return {
            method: "PATCH",
            path: `/api/v1/assets/${id}`,
            contentType: "application/merge-patch+json",
            body: JSON.stringify({ description: `soak ${unique()}` }),
          };
        }
        return {
          method: "POST",
          path: `/api/v1/assets/${id}/tags`,
          contentType: "application/json",
          body: JSON.stringify({ tag_type: "barcode", value: `SOAK-${plan.runId}-${unique()}` }),
        };
      };
  }
}
