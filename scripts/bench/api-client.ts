/**
 * The benchmark's own HTTP calls (seeding, completion polls, probes), not the
 * measured load: that comes from the load runner process. Replies are parsed
 * with zod at this boundary, keeping only the fields the benchmark reads.
 */
import { z } from "zod";

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly method: string,
    readonly path: string,
    readonly body: string,
  ) {
    super(`${method} ${path}: ${status} ${body.slice(0, 300)}`);
  }
}

export const AssetReply = z.object({
  data: z.object({ id: z.number().int(), location_id: z.number().int().nullable() }),
});
export const LocationReply = z.object({ data: z.object({ id: z.number().int(), external_key: z.string() }) });
export const OrgReply = z.object({ data: z.object({ id: z.number().int() }) });
export const ReportPage = z.object({
  data: z.array(z.object({ asset_id: z.number().int(), location_id: z.number().int().nullable(), asset_last_seen: z.string() })),
  total_count: z.number().int(),
});
export const HistoryPage = z.object({
  data: z.array(z.object({ event_observed_at: z.string(), location_id: z.number().int().nullable() })),
  total_count: z.number().int(),
});

export interface ApiClient {
  readonly baseUrl: string;
  readonly apiKey: string;
  get<T>(path: string, schema: z.ZodType<T>): Promise<T>;
  post<T>(path: string, body: unknown, schema: z.ZodType<T>): Promise<T>;
}

/** Retries only 503 (a service catching up) and network errors, a few times. */
export function createApiClient(baseUrl: string, apiKey: string): ApiClient {
  async function call<T>(method: "GET" | "POST", path: string, body: unknown, schema: z.ZodType<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${apiKey}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(30_000),
        });
      } catch (err) {
        if (attempt >= 3) throw err;
        await new Promise((r) => setTimeout(r, 200 * attempt));
        continue;
      }
      const text = await res.text();
      if (res.status === 503 && attempt < 5) {
        await new Promise((r) => setTimeout(r, 200 * attempt));
        continue;
      }
      if (res.status < 200 || res.status > 299) throw new ApiError(res.status, method, path, text);
      return schema.parse(JSON.parse(text));
    }
  }
  return {
    baseUrl,
    apiKey,
    get: (path, schema) => call("GET", path, undefined, schema),
    post: (path, body, schema) => call("POST", path, body, schema),
  };
}

/** Runs `work(i)` for i in [0, count) with at most `concurrency` at once; results in order. */
export async function mapConcurrent<T>(count: number, concurrency: number, work: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await work(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}
