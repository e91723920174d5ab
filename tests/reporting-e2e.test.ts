/**
 * End to end with the real catalog and tracking: writes through the gateway,
 * positions from a scan, and read-your-writes in a loop. After each 2xx write
 * (asset rename, location rename, tag attach, asset delete) the very next
 * report request must show it: a few hundred reads, never a stale row.
 *
 * Skips itself (with the reason) while catalog or tracking cannot serve it yet.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { encodeJson, scanSubject } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
let t: { orgId: number; auth: Record<string, string> };
const ROUNDS = 60;

async function call(method: "GET" | "POST" | "DELETE", url: string, body?: unknown) {
  return stack.gateway.inject({
    method,
    url,
    headers: { ...t.auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
}
async function report(query: string) {
  const res = await call("GET", `/api/v1/reports/asset-locations?${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { data: Array<Record<string, unknown>>; total_count: number };
}

beforeAll(async () => {
  stack = await startStack({ label: "reporting_e2e", services: ["catalog", "tracking", "reporting"] });
  t = await stack.tenant("E2E");
});
afterAll(async () => stack?.close());

describe("reporting end to end", () => {
  it("never serves a stale row right after a write", { timeout: 60_000 }, async (ctx) => {
    const probe = await call("POST", "/api/v1/locations", { name: "Dock one", external_key: "E2E-DOCK-1" });
    expect(probe.statusCode, probe.body).toBe(201);
    const dock = probe.json().data as { id: number };

    // One asset renamed and tagged every round, one asset deleted every round.
    const main = await call("POST", "/api/v1/assets", {
      name: "Forklift",
      external_key: "E2E-MAIN",
      tags: [{ tag_type: "rfid", value: "E2E-RFID-MAIN" }],
    });
    expect(main.statusCode, main.body).toBe(201);
    const mainId = (main.json().data as { id: number }).id;
    const doomed: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const res = await call("POST", "/api/v1/assets", {
        name: `Pallet ${i}`,
        external_key: `E2E-DOOMED-${i}`,
        tags: [{ tag_type: "barcode", value: `E2E-DOOMED-TAG-${i}` }],
      });
      expect(res.statusCode, res.body).toBe(201);
      doomed.push((res.json().data as { id: number }).id);
    }

    // Positions come from one scan through tracking.
    await jetstream(stack.nc).publish(
      scanSubject(t.orgId, "dock-reader"),
      encodeJson({
        event_id: randomUUID(),
        observed_at: new Date().toISOString(),
        location: { external_key: "E2E-DOCK-1" },
        tags: [
          { tag_type: "rfid", value: "E2E-RFID-MAIN" },
          ...doomed.map((_, i) => ({ tag_type: "barcode", value: `E2E-DOOMED-TAG-${i}` })),
        ],
      }),
    );
    await eventually(async () => ((await report("limit=1")).total_count === ROUNDS + 1 ? true : undefined), 15_000);
    expect((await report(`asset_id=${mainId}`)).data[0]).toMatchObject({
      asset_external_key: "E2E-MAIN",
      location_id: dock.id,
      location_external_key: "E2E-DOCK-1",
    });

    let reads = 0;
    const started = Date.now();
    for (let i = 0; i < ROUNDS; i++) {
      const assetKey = `E2E-MAIN-${i}`;
      const renamed = await call("POST", `/api/v1/assets/${mainId}/rename`, { external_key: assetKey });
      expect(renamed.statusCode, renamed.body).toBe(200);
      expect((await report(`asset_id=${mainId}`)).data[0]?.asset_external_key).toBe(assetKey);

      const locationKey = `E2E-DOCK-R${i}`;
      const moved = await call("POST", `/api/v1/locations/${dock.id}/rename`, { external_key: locationKey });
      expect(moved.statusCode, moved.body).toBe(200);
      expect((await report(`asset_id=${mainId}`)).data[0]?.location_external_key).toBe(locationKey);
      expect((await report(`location_external_key=${locationKey}&limit=1`)).total_count).toBe(ROUNDS + 1 - i);

      const tagValue = `e2e-fresh-tag-${i}-${randomUUID()}`;
      const tagged = await call("POST", `/api/v1/assets/${mainId}/tags`, { tag_type: "ble", value: tagValue });
      expect(tagged.statusCode, tagged.body).toBe(201);
      expect((await report(`q=${tagValue}`)).data.map((r) => r.asset_id)).toEqual([mainId]);

      const deleted = await call("DELETE", `/api/v1/assets/${doomed[i]}`);
      expect(deleted.statusCode, deleted.body).toBe(204);
      expect((await report(`asset_id=${doomed[i]}`)).data).toEqual([]);
      const withDeleted = await report(`asset_id=${doomed[i]}&include_deleted=true`);
      expect(withDeleted.data[0]?.asset_deleted_at).toEqual(expect.any(String));
      reads += 6;
    }
    expect(reads).toBe(ROUNDS * 6);
    ctx.annotate?.(`${reads} reads after writes in ${Date.now() - started} ms`);
  });
});
