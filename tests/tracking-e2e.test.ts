/**
 * End to end with the real catalog: master data written through the gateway,
 * scans published to SCANS at once ("catalog writes come first"), history
 * read back, and the asset record, asset list filter and location delete
 * check following the scans through tracking's asset.moved events.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";
import { deadLetters, publishScan } from "../services/tracking/src/testing/tracking-fixtures.ts";

let stack: Stack;
let orgId: number;
let auth: Record<string, string>;

beforeAll(async () => {
  stack = await startStack({ label: "tracking_e2e", services: ["catalog", "tracking"] });
  ({ orgId, auth } = await stack.tenant());
});
afterAll(async () => stack?.close());

async function call(method: "GET" | "POST" | "DELETE", url: string, payload?: unknown) {
  const res = await stack.gateway.inject({
    method,
    url,
    headers: { ...auth, ...(payload === undefined ? {} : { "content-type": "application/json" }) },
    ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
  });
  return { status: res.statusCode, body: res.body ? res.json() : undefined };
}

const scan = (observedAt: string, locationKey: string, values: string[]) => ({
  observed_at: observedAt,
  location: { external_key: locationKey },
  tags: values.map((value) => ({ tag_type: "rfid", value })),
});

describe("tracking with the real catalog", () => {
  it("a scan of a just-created asset lands in history and moves the asset", async () => {
    const dock = await call("POST", "/api/v1/locations", { name: "Dock 1", external_key: "E2E-DOCK-1" });
    expect(dock.status).toBe(201);
    const yard = await call("POST", "/api/v1/locations", { name: "Yard", external_key: "E2E-YARD" });
    expect(yard.status).toBe(201);
    const asset = await call("POST", "/api/v1/assets", {
      name: "Pallet 1",
      external_key: "E2E-PALLET-1",
      tags: [{ tag_type: "rfid", value: "E2E-TAG-1" }],
    });
    expect(asset.status).toBe(201);
    const assetId = asset.body.data.id as number;
    const dockId = dock.body.data.id as number;

    await publishScan(stack.nc, orgId, scan("2026-11-20T10:15:00.250Z", "E2E-DOCK-1", ["E2E-TAG-1"]));
    const page = await eventually(async () => {
      const res = await call("GET", `/api/v1/assets/${assetId}/history`);
      return res.body?.total_count === 1 ? res.body : undefined;
    });
    expect(page.data).toEqual([
      { event_observed_at: "2026-11-20T10:15:00.250Z", location_id: dockId, location_external_key: "E2E-DOCK-1", duration_seconds: null },
    ]);

    const record = await eventually(async () => {
      const res = await call("GET", `/api/v1/assets/${assetId}`);
      return res.body?.data?.location_id === dockId ? res.body.data : undefined;
    });
    expect(record).toMatchObject({ location_id: dockId, location_external_key: "E2E-DOCK-1" });
    const listed = await call("GET", `/api/v1/assets?location_id=${dockId}`);
    expect(listed.body.data.map((a: { id: number }) => a.id)).toEqual([assetId]);

    // Placed there: the location cannot be deleted; once the asset moved on, it can.
    expect((await call("DELETE", `/api/v1/locations/${dockId}`)).status).toBe(409);
    await publishScan(stack.nc, orgId, scan("2026-11-20T10:20:00Z", "E2E-YARD", ["E2E-TAG-1"]));
    await eventually(async () => ((await call("GET", `/api/v1/assets/${assetId}`)).body?.data?.location_external_key === "E2E-YARD" ? true : undefined));
    expect((await call("DELETE", `/api/v1/locations/${dockId}`)).status).toBe(204);
    const after = await call("GET", `/api/v1/assets/${assetId}/history?sort=event_observed_at`);
    expect(after.body.data[1]).toMatchObject({ location_external_key: "E2E-YARD", duration_seconds: 299 });
    // The soft-deleted dock keeps its key on the history row.
    expect(after.body.data[0]).toMatchObject({ location_id: dockId, location_external_key: "E2E-DOCK-1" });
  });

  it("catalog writes come first: a tag attached through the API and scanned at once is never dead-lettered", async () => {
    expect((await call("POST", "/api/v1/locations", { name: "Gate", external_key: "E2E-GATE" })).status).toBe(201);
    const before = (await deadLetters(stack.nc)).length;
    const assetIds: number[] = [];
    for (let i = 0; i < 100; i++) {
      const asset = await call("POST", "/api/v1/assets", { name: `Box ${i}` });
      expect(asset.status).toBe(201);
      const tag = await call("POST", `/api/v1/assets/${asset.body.data.id}/tags`, { tag_type: "rfid", value: `E2E-FAST-${i}` });
      expect(tag.status).toBe(201);
      assetIds.push(asset.body.data.id);
      await publishScan(stack.nc, orgId, scan("2026-11-21T00:00:00Z", "E2E-GATE", [`E2E-FAST-${i}`]));
    }
    for (const assetId of [assetIds[0]!, assetIds[99]!]) {
      await eventually(async () => ((await call("GET", `/api/v1/assets/${assetId}/history`)).body?.total_count === 1 ? true : undefined));
    }
    expect((await deadLetters(stack.nc)).length).toBe(before);
  });
});
