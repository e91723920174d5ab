/**
 * Lets the stack go quiet before a case. A case that overloads a service
 * leaves work behind: requests the gateway gave up on (503 after its RPC
 * timeout) are still queued in the service, and the next case would measure
 * that queue. One cheap read per service (catalog, tracking, reporting) is
 * sent until all three answer 2xx quickly; being queued behind the leftover
 * work, they answer quickly only once it is done. The wait is reported.
 */
import type { BenchContext } from "./bench-context.ts";

const QUICK_MS = 1000;
const SETTLE_TIMEOUT_MS = 120_000;

async function quickRead(baseUrl: string, apiKey: string, path: string): Promise<boolean> {
  const t0 = performance.now();
  try {
    const res = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` }, signal: AbortSignal.timeout(15_000) });
    await res.arrayBuffer();
    return res.ok && performance.now() - t0 < QUICK_MS;
  } catch {
    return false;
  }
}

/** Milliseconds waited; gives up (and says so) after two minutes rather than block the run. */
export async function settleStack(ctx: Pick<BenchContext, "api" | "roles" | "log">): Promise<{ ms: number; settled: boolean }> {
  const { baseUrl, apiKey } = ctx.api;
  const id = ctx.roles.marker.id;
  const started = performance.now();
  for (;;) {
    const answers = await Promise.all([
      quickRead(baseUrl, apiKey, `/api/v1/assets/${id}`),
      quickRead(baseUrl, apiKey, `/api/v1/assets/${id}/history?limit=1`),
      quickRead(baseUrl, apiKey, `/api/v1/reports/asset-locations?limit=1&asset_id=${id}`),
    ]);
    const ms = performance.now() - started;
    if (answers.every(Boolean)) return { ms, settled: true };
    if (ms > SETTLE_TIMEOUT_MS) {
      ctx.log(`stack still busy after ${Math.round(ms / 1000)} s; starting the next case anyway`);
      return { ms, settled: false };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
