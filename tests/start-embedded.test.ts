/**
 * `npm start` on a machine with nothing running: EMBEDDED_POSTGRES=1 (so the
 * machine's own Postgres is left alone) on a free port with its data under a
 * temporary DATA_DIR, and no broker at NATS_URL, so npm start runs
 * nats-server with the project's config, MQTT listener included. The API
 * serves a key issued by the admin CLI; SIGTERM stops everything, Postgres
 * and nats-server included.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "@whereabouts/shared";
import { freePort } from "@whereabouts/shared/testing";
import { tcpAnswers } from "../scripts/start/local-nats.ts";
import { exitWithin, runScript, stopRun, waitReady, type Run } from "./start-support.ts";

const execFileAsync = promisify(execFile);

let dataDir: string;
let run: Run | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "wa_startup_embedded-"));
  // Run as root, Postgres runs as the postgres user, which must reach its data directory.
  await chmod(dataDir, 0o755);
});
afterAll(async () => {
  await stopRun(run);
  await rm(dataDir, { recursive: true, force: true });
});

describe("npm start with an embedded PostgreSQL and its own nats-server", () => {
  it("serves the API with a key from the admin CLI, and stops every server it started", { timeout: 240_000 }, async () => {
    const [pgPort, natsPort, mqttPort, port] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const databaseUrl = `postgresql://postgres@127.0.0.1:${pgPort}/whereabouts`;
    run = runScript("scripts/start.ts", {
      EMBEDDED_POSTGRES: "1",
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      NATS_URL: `nats://127.0.0.1:${natsPort}`,
      MQTT_PORT: String(mqttPort),
      PORT: String(port),
      OPS_PORT: "0",
      LOG_LEVEL: "warn",
    });
    const base = `http://127.0.0.1:${port}`;
    expect(await waitReady(base, run, 180_000), run.output()).toBe(200);

    const output = run.output();
    expect(output.match(/running an embedded PostgreSQL/g), output).toHaveLength(1);
    expect(output).toContain(`at 127.0.0.1:${pgPort}, data in ${path.join(dataDir, "pg")}`);
    expect(output).toMatch(/NATS does not answer at .*: starting .*nats-server/);
    expect(existsSync(path.join(dataDir, "pg", "PG_VERSION"))).toBe(true);
    // The project's config: fixed readers have their MQTT listener, and nobody is warned otherwise.
    expect(await tcpAnswers("127.0.0.1", mqttPort)).toBe(true);
    expect(output).not.toContain("no MQTT listener");

    const admin = async (args: string[]) => {
      const env = { ...process.env, DATABASE_URL: databaseUrl, GATEWAY_DATABASE_URL: "" };
      const { stdout } = await execFileAsync(process.execPath, ["--import", "tsx", "services/gateway/src/admin/admin-cli.ts", ...args], { cwd: repoRoot, env });
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const org = await admin(["org", "create", "--name", "Fresh machine"]);
    const key = await admin(["key", "create", "--org", String(org.id), "--scopes", "all"]);
    const headers = { authorization: `Bearer ${String(key.key)}`, "content-type": "application/json" };
    const created = await fetch(`${base}/api/v1/assets`, { method: "POST", headers, body: JSON.stringify({ name: "Forklift" }) });
    expect(created.status).toBe(201);
    const asset = ((await created.json()) as { data: { id: number; name: string } }).data;
    const read = await fetch(`${base}/api/v1/assets/${asset.id}`, { headers });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { data: { name: string } }).data.name).toBe("Forklift");

    run.child.kill("SIGTERM");
    expect(await exitWithin(run, 40_000), run.output()).toEqual({ code: 0, signal: null });
    // Postgres removes its pid file on a clean stop; both ports are closed.
    expect(existsSync(path.join(dataDir, "pg", "postmaster.pid"))).toBe(false);
    expect(await tcpAnswers("127.0.0.1", pgPort)).toBe(false);
    expect(await tcpAnswers("127.0.0.1", natsPort)).toBe(false);
    expect(await tcpAnswers("127.0.0.1", mqttPort)).toBe(false);
  });
});
