/** A private stack for the HTTP fuzzer: every service, a listening gateway, keys, and some rows to hit. */
import { freePort } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";
import type { FuzzKeys } from "./http-fuzz.ts";

export interface FuzzStack {
  stack: Stack;
  port: number;
  keys: FuzzKeys;
}

export async function startFuzzStack(label: string): Promise<FuzzStack> {
  // No rate limit in the way: the fuzzer checks answers, not quotas.
  const stack = await startStack({ label, rateLimit: { max: 1_000_000_000, windowMs: 60_000 } });
  const org = await stack.createOrg("Fuzz Org");
  const keys: FuzzKeys = {
    all: (await stack.createKey({ org: org.id })).key,
    noOrg: (await stack.createKey({ org: null })).key,
    readOnly: (await stack.createKey({ org: org.id, scopes: "assets:read" })).key,
  };
  const post = async (url: string, body: unknown) => {
    const res = await stack.gateway.inject({
      method: "POST",
      url,
      headers: { authorization: `Bearer ${keys.all}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });
    if (res.statusCode !== 201) throw new Error(`seeding ${url}: ${res.statusCode} ${res.body}`);
    return res.json().data as { id: number };
  };
  // Ids 1..20 of each resource exist, so generated ids often resolve.
  let parent: number | null = null;
  for (let i = 1; i <= 20; i++) {
    const location: { id: number } = await post("/api/v1/locations", { name: `Loc ${i}`, parent_id: i % 4 === 1 ? null : parent });
    parent = location.id;
    await post("/api/v1/locations/" + location.id + "/tags", { tag_type: "ble", value: `L-${i}` });
    const asset = await post("/api/v1/assets", { name: `Asset ${i}`, metadata: { i }, tags: [{ tag_type: "rfid", value: `A-${i}` }] });
    await post(`/api/v1/assets/${asset.id}/tags`, { tag_type: "barcode", value: `B-${i}` });
  }
  const port = await freePort();
  await stack.gateway.listen({ host: "127.0.0.1", port });
  return { stack, port, keys };
}
