/**
 * The MQTT path of fixed readers: a nats-server started with the project's
 * deploy/nats/nats.conf (only the ports and store directory swapped for free
 * ones), an MQTT client publishing QoS 1 to `scans/<org_id>/<source>`, and the
 * scan showing up in the asset's history.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import mqtt from "mqtt";
import {
  connectNats,
  createLogger,
  encodeJson,
  ensureStreams,
  repoRoot,
  decodeRpcReply,
  type NatsConnection,
  type RunningService,
} from "@whereabouts/shared";
import { eventually, freePort, waitForPort, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { startTracking } from "../services/tracking/src/app.ts";
import { catalogFixture } from "../services/tracking/src/testing/tracking-fixtures.ts";

let dir: string;
let server: ChildProcess | undefined;
let db: TestDatabase;
let nc: NatsConnection;
let tracking: RunningService;
let natsPort: number;
let mqttPort: number;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "wa-mqtt-"));
  natsPort = await freePort();
  mqttPort = await freePort();
  const shipped = await readFile(path.join(repoRoot, "deploy/nats/nats.conf"), "utf8");
  // Same file, its MQTT port swapped for a free one.
  const config = shipped.replace(/(mqtt\s*\{[^}]*?\bport:\s*)\d+/, `$1${mqttPort}`);
  expect(config).not.toBe(shipped);
  await writeFile(path.join(dir, "nats.conf"), config);
  server = spawn("nats-server", ["-c", path.join(dir, "nats.conf"), "-p", String(natsPort), "-sd", path.join(dir, "store")], {
    stdio: "ignore",
  });
  await waitForPort(natsPort, 10_000);
  await waitForPort(mqttPort, 10_000);

  db = await createMigratedDatabase("tracking_mqtt");
  const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
  nc = await connectNats({ url: `nats://127.0.0.1:${natsPort}`, name: "test", logger });
  await ensureStreams(nc);
  const serviceNc = await connectNats({ url: `nats://127.0.0.1:${natsPort}`, name: "tracking", logger });
  tracking = await startTracking({ nc: serviceNc, logger, databaseUrl: db.url });
});

afterAll(async () => {
  await tracking?.stop();
  await nc?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server!.once("exit", resolve));
    server.kill("SIGTERM");
    await exited;
  }
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe("MQTT ingestion", () => {
  it("a QoS 1 publish to scans/<org_id>/<source> lands in SCANS and in the asset's history", async () => {
    const orgId = 7;
    const cat = catalogFixture(nc);
    await cat.location(orgId, { id: 11, external_key: "GATE-1" });
    await cat.asset(orgId, { id: 21 });
    await cat.tag(orgId, { id: 31, value: "E28011606000020A4C6F8D21", owner_type: "asset", owner_id: 21 });

    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { clientId: "reader-gate-1", clean: true });
    try {
      const payload = {
        event_id: "01JD3Q8Z5S7V4T0M2W6Y1X9R8K",
        observed_at: "2026-11-20T10:15:00.250Z",
        location: { external_key: "GATE-1" },
        tags: [{ tag_type: "rfid", value: "E28011606000020A4C6F8D21" }],
      };
      const ack = await client.publishAsync(`scans/${orgId}/gate-1`, JSON.stringify(payload), { qos: 1 });
      // Resolves once the broker sent PUBACK.
      expect(ack).toMatchObject({ cmd: "publish", qos: 1 });
    } finally {
      await client.endAsync();
    }

    const request = {
      request_id: "mqtt-test",
      principal: { key_id: 1, org_id: orgId, scopes: ["assets:read"] },
      method: "GET",
      route: "/api/v1/assets/:asset_id/history",
      path: "/api/v1/assets/21/history",
      params: { asset_id: "21" },
      query: {},
      body: null,
    };
    const body = await eventually(async () => {
      const msg = await nc.request("tracking.history.list", encodeJson(request), { timeout: 2000 });
      const reply = decodeRpcReply(msg);
      const page = reply.body as { total_count: number };
      return reply.status === 200 && page.total_count === 1 ? page : undefined;
    }, 15_000);
    expect(body).toEqual({
      data: [{ event_observed_at: "2026-11-20T10:15:00.250Z", location_id: 11, location_external_key: "GATE-1", duration_seconds: null }],
      limit: 50,
      offset: 0,
      total_count: 1,
    });
  });
});
