/**
 * Seed data (concurrent creates, not timed as a case): locations, and assets
 * with one RFID tag each, one in `zephyrEvery` named with "zephyr" so
 * `q=zephyr` matches about 1%. Keys carry the run id, so a run against an
 * existing stack never collides with what is there.
 *
 * Creates go through the catalog's own create operations: as RPC envelopes
 * published straight to the catalog service when NATS is reachable (what
 * the gateway forwards, minus the HTTP hop), otherwise as POSTs to the
 * public API. A stack the benchmark started is seeded faster by
 * catalog-bulk-seed.ts unless --api-seed is given.
 */
import { z } from "zod";
import { callRpc, rpcSubject, type NatsConnection, type RpcRequest } from "@whereabouts/shared";
import { AssetReply, LocationReply, mapConcurrent, type ApiClient } from "./api-client.ts";

const SeededAssetView = z.object({ data: z.object({ id: z.number(), tags: z.array(z.object({ value: z.string() })) }) });
const ListTotal = z.object({ total_count: z.number() });

type Resource = "asset" | "location";

/** Creates one asset or location and returns the reply body. */
export type CatalogWriter = (resource: Resource, body: unknown) => Promise<unknown>;

export function httpCatalogWriter(api: ApiClient): CatalogWriter {
  return (resource, body) => api.post(`/api/v1/${resource}s`, body, z.unknown());
}

export function rpcCatalogWriter(nc: NatsConnection, orgId: number): CatalogWriter {
  let n = 0;
  return async (resource, body) => {
    const path = `/api/v1/${resource}s`;
    const request: RpcRequest = {
      request_id: `bench-seed-${++n}`,
      principal: { key_id: 0, org_id: orgId, scopes: [`${resource}s:write`] },
      method: "POST",
      route: path,
      path,
      params: {},
      query: {},
      body,
    };
    for (let attempt = 1; ; attempt++) {
      const reply = await callRpc(nc, rpcSubject("catalog", `${resource}.create`), request, { timeoutMs: 30_000 });
      if (reply.status === 201) return reply.body;
      if (reply.status !== 503 || attempt >= 5) throw new Error(`catalog ${resource}.create: ${reply.status} ${JSON.stringify(reply.body)}`);
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  };
}

export interface SeededLocation {
  id: number;
  externalKey: string;
}

export interface SeededAsset {
  id: number;
  /** Value of its RFID tag. */
  tagValue: string;
}

export interface CatalogSeed {
  runId: string;
  locations: SeededLocation[];
  assets: SeededAsset[];
  zephyrAssets: number;
  seconds: number;
}

export const pad = (n: number, width = 6) => String(n).padStart(width, "0");

export async function seedCatalog(
  write: CatalogWriter,
  o: { runId: string; locations: number; assets: number; zephyrEvery: number; concurrency: number; log: (m: string) => void },
): Promise<CatalogSeed> {
  const started = Date.now();
  const locations = await mapConcurrent(o.locations, o.concurrency, async (i) => {
    const externalKey = `BL-${o.runId}-${pad(i + 1, 4)}`;
    const reply = LocationReply.parse(await write("location", { name: `Bench location ${i + 1}`, external_key: externalKey }));
    return { id: reply.data.id, externalKey };
  });
  o.log(`seeded ${locations.length} locations in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  let zephyrAssets = 0;
  let done = 0;
  const assets = await mapConcurrent(o.assets, o.concurrency, async (i) => {
    const n = i + 1;
    const zephyr = n % o.zephyrEvery === 0;
    if (zephyr) zephyrAssets++;
    const tagValue = `BENCH-${o.runId}-${pad(n)}`;
    const reply = AssetReply.parse(
      await write("asset", {
        name: zephyr ? `Bench asset ${n} zephyr crate` : `Bench asset ${n} pallet`,
        external_key: `BA-${o.runId}-${pad(n)}`,
        tags: [{ tag_type: "rfid", value: tagValue }],
      }),
    );
    if (++done % 5000 === 0) o.log(`seeded ${done} of ${o.assets} assets`);
    return { id: reply.data.id, tagValue };
  });
  const seconds = (Date.now() - started) / 1000;
  o.log(`seeded ${assets.length} assets (${zephyrAssets} named zephyr) in ${seconds.toFixed(1)} s total`);
  return { runId: o.runId, locations, assets, zephyrAssets, seconds };
}

/** Fails loudly when the API does not show what was seeded (an asset with its tag, the zephyr names). */
export async function verifySeed(api: ApiClient, seed: CatalogSeed): Promise<void> {
  const first = seed.assets[0]!;
  const asset = await api.get(`/api/v1/assets/${first.id}`, SeededAssetView);
  if (!asset.data.tags.some((t) => t.value === first.tagValue)) throw new Error(`seeded asset ${first.id} does not show its tag ${first.tagValue}`);
  const zephyr = await api.get("/api/v1/assets?q=zephyr&limit=1", ListTotal);
  if (zephyr.total_count < seed.zephyrAssets) {
    throw new Error(`q=zephyr finds ${zephyr.total_count} assets, ${seed.zephyrAssets} were seeded`);
  }
}
