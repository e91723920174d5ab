/**
 * deploy/nats/values.yaml (the official NATS chart's values): its shape, then
 * its authorization for real: the config the chart renders from
 * `config.merge` (JSON, `<< ... >>` unquoted, `$VAR` from the Secret-fed
 * environment) runs in a local nats-server, where the services' user creates
 * the real streams and a reader may publish scans for its own organization
 * only, over NATS and over MQTT.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import mqtt from "mqtt";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ensureStreams, STREAMS } from "@whereabouts/shared";
import { eventually, freePort, waitForPort } from "@whereabouts/shared/testing";
import { isObject, loadYamlDocuments, repoRoot, type Json, type JsonObject } from "./deploy-render.ts";

const values = loadYamlDocuments(path.join(repoRoot, "deploy/nats/values.yaml"))[0] as JsonObject;
const config = values.config as JsonObject;
const merge = config.merge as JsonObject;
const accounts = merge.accounts as Record<string, { jetstream?: string; users: JsonObject[] }>;
const containerEnv = (values.container as JsonObject).env as Record<string, JsonObject>;
/** The application's account: the one with JetStream. */
const [appAccountName, appAccount] = Object.entries(accounts).find(([, a]) => a.jetstream === "enabled")!;
const users = appAccount.users;
const servicesUser = users.find((u) => !u.permissions)!;
const readers = users.filter((u) => u.permissions);
const READER_SUBJECT = /^scans\.(\d+)\.>$/;
const variableOf = (password: Json) => /^<< \$([A-Z_][A-Z0-9_]*) >>$/.exec(String(password))?.[1];

describe("NATS chart values", () => {
  it("runs a three-node JetStream cluster with file storage and the MQTT listener", () => {
    expect(config.cluster).toMatchObject({ enabled: true, replicas: 3 });
    expect(config.jetstream).toMatchObject({ enabled: true, fileStore: { enabled: true, pvc: { enabled: true } } });
    expect(config.mqtt).toMatchObject({ enabled: true, port: 1883 });
    expect((config.monitor as JsonObject).enabled).toBe(true);
    expect(values.natsBox).toMatchObject({ enabled: false });
  });

  it("keeps the broker limits of deploy/nats/nats.conf", async () => {
    const local = await readFile(path.join(repoRoot, "deploy/nats/nats.conf"), "utf8");
    const maxPayload = /^max_payload:\s*(\S+)/m.exec(local)?.[1];
    expect(merge.max_payload).toBe(`<< ${maxPayload} >>`);
    const mqttPort = /mqtt\s*\{[^}]*?\bport:\s*(\d+)/.exec(local)?.[1];
    expect(String((config.mqtt as JsonObject).port)).toBe(mqttPort);
  });

  it("gives the services one user with full rights and every reader its own organization's scan subjects only", () => {
    expect(servicesUser.user).toBe("whereabouts");
    expect(users.filter((u) => !u.permissions)).toHaveLength(1);
    expect(readers.length).toBeGreaterThan(0);
    for (const reader of readers) {
      const permissions = reader.permissions as JsonObject;
      const publish = permissions.publish as JsonObject;
      expect(publish.allow, String(reader.user)).toHaveLength(1);
      expect((publish.allow as string[])[0], String(reader.user)).toMatch(READER_SUBJECT);
      expect(publish.deny).toBeUndefined();
      expect(permissions.subscribe, String(reader.user)).toEqual({ deny: [">"] });
    }
    const names = users.map((u) => u.user);
    expect(new Set(names).size).toBe(names.length);
  });

  it("takes plain passwords only from the Secret-fed environment, otherwise bcrypt hashes", () => {
    const all = Object.values(accounts).flatMap((a) => a.users);
    for (const u of all) {
      const variable = variableOf(u.password!);
      if (variable) {
        const env = containerEnv[variable];
        expect(env, `${variable} in container.env`).toBeDefined();
        expect(((env!.valueFrom as JsonObject | undefined)?.secretKeyRef as JsonObject | undefined)?.name, variable).toBe("nats-auth");
      } else {
        expect(String(u.password), `${String(u.user)}: bcrypt`).toMatch(/^\$2[abxy]\$\d{2}\$.{53}$/);
      }
    }
    // The chart's env map: every value an object (secretKeyRef or value).
    for (const [name, env] of Object.entries(containerEnv)) expect(isObject(env), name).toBe(true);
  });
});

// ------------------------------------------------------------ live server

/** The nats.conf the chart writes: JSON, `<< x >>` strings unquoted (units, variables). */
function renderNatsConf(mergeSection: JsonObject, extra: JsonObject): string {
  const deepMerge = (a: Json, b: Json): Json => {
    if (!isObject(a) || !isObject(b)) return b;
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    return Object.fromEntries(keys.map((k) => [k, k in b ? deepMerge(a[k] ?? null, b[k]!) : a[k]!]));
  };
  const jetstream = config.jetstream as JsonObject;
  const chartPart: JsonObject = {
    jetstream: {
      max_memory_store: `<< ${String((jetstream.memoryStore as JsonObject).maxSize)} >>`,
      max_file_store: `<< ${String((jetstream.fileStore as JsonObject).maxSize)} >>`,
    },
  };
  const conf = deepMerge(deepMerge(chartPart, mergeSection), extra);
  return JSON.stringify(conf, null, 2).replace(/"<< (.*?) >>"/g, "$1");
}

const readerPassword = "reader-test-password";
const reader = readers[0]!;
const readerOrg = Number(READER_SUBJECT.exec(((reader.permissions as JsonObject).publish as { allow: string[] }).allow[0]!)![1]);
const otherOrg = readerOrg + 1;
// nats-server parses an environment variable's value as a config value: one
// that starts with a digit is read as a number and fails. Secrets must start
// with a letter (docs/operations.md), and so do these.
const secret = () => `s${randomBytes(12).toString("hex")}`;
const env = { NATS_SERVICES_PASSWORD: secret(), NATS_SYS_PASSWORD: secret() };

let dir: string;
let server: ChildProcess | undefined;
let natsPort: number;
let mqttPort: number;
let services: NatsConnection;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "wa-nats-values-"));
  [natsPort, mqttPort] = [await freePort(), await freePort()];
  // The example reader with a password we know (the shipped hash matches none).
  const testMerge = structuredClone(merge);
  const testUsers = ((testMerge.accounts as JsonObject)[appAccountName] as { users: JsonObject[] }).users;
  testUsers.find((u) => u.user === reader.user)!.password = readerPassword;
  const conf = renderNatsConf(testMerge, {
    // What the chart sets per pod and the ports this test can use.
    server_name: "deploy-test",
    host: "127.0.0.1",
    port: natsPort,
    jetstream: { store_dir: path.join(dir, "js") },
    mqtt: { host: "127.0.0.1", port: mqttPort },
  });
  await writeFile(path.join(dir, "nats.conf"), conf);
  const log: Buffer[] = [];
  server = spawn(process.env.NATS_SERVER_BIN || "nats-server", ["-c", path.join(dir, "nats.conf")], { env: { ...process.env, ...env } });
  server.stderr?.on("data", (d: Buffer) => log.push(d));
  server.stdout?.on("data", (d: Buffer) => log.push(d));
  try {
    await waitForPort(natsPort, 10_000);
    await waitForPort(mqttPort, 10_000);
  } catch (err) {
    throw new Error(`nats-server did not start:\n${Buffer.concat(log).toString()}\n${conf}`, { cause: err });
  }
  services = await connect({ servers: [`nats://127.0.0.1:${natsPort}`], user: String(servicesUser.user), pass: env.NATS_SERVICES_PASSWORD });
  await ensureStreams(services);
});

afterAll(async () => {
  await services?.close();
  if (server && server.exitCode === null) {
    const proc = server;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGTERM");
    });
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function scanSubjectsStored(): Promise<string[]> {
  const jsm = await jetstreamManager(services);
  const info = await jsm.streams.info(STREAMS.SCANS.name, { subjects_filter: ">" });
  return Object.keys(info.state.subjects ?? {}).sort();
}

describe("NATS authorization from the chart values (live nats-server)", () => {
  it("lets the services' user create the streams and use every subject", async () => {
    const jsm = await jetstreamManager(services);
    const names: string[] = [];
    for await (const s of jsm.streams.list()) names.push(s.config.name);
    expect(names).toEqual(expect.arrayContaining([STREAMS.SCANS.name, STREAMS.CATALOG.name, STREAMS.TRACKING.name]));
    const sub = services.subscribe("catalog.ping", { max: 1, callback: (_err, msg) => {
        msg.respond("pong");
      },
    });
    const reply = await services.request("catalog.ping", "", { timeout: 2000 });
    expect(reply.string()).toBe("pong");
    sub.unsubscribe();
  });

  it("refuses a connection without credentials", async () => {
    await expect(connect({ servers: [`nats://127.0.0.1:${natsPort}`], reconnect: false })).rejects.toThrow(/authorization/i);
  });

  it("lets a reader publish its organization's scans over NATS, and nothing else", async () => {
    const nc = await connect({ servers: [`nats://127.0.0.1:${natsPort}`], user: String(reader.user), pass: readerPassword });
    const errors: string[] = [];
    void (async () => {
      for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.error));
    })();
    nc.publish(`scans.${readerOrg}.handheld-1`, "{}");
    nc.publish(`scans.${otherOrg}.handheld-1`, "{}");
    nc.publish(`catalog.events.${readerOrg}.asset.created`, "{}");
    await nc.flush();
    await eventually(async () => ((await scanSubjectsStored()).includes(`scans.${readerOrg}.handheld-1`) ? true : undefined));
    nc.subscribe(`scans.${readerOrg}.>`);
    await nc.flush().catch(() => undefined);
    await eventually(async () => (errors.some((e) => /subscription/i.test(e)) ? true : undefined));
    expect(errors.filter((e) => /publish/i.test(e)).length).toBeGreaterThanOrEqual(2);
    expect(await scanSubjectsStored()).not.toContain(`scans.${otherOrg}.handheld-1`);
    await nc.close().catch(() => undefined);
  });

  it("lets a reader publish over MQTT (QoS 1) to scans/<its org>/<source> only", async () => {
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: String(reader.user),
      password: readerPassword,
      clientId: "deploy-test-reader",
      reconnectPeriod: 0,
    });
    await client.publishAsync(`scans/${readerOrg}/dock-1`, "{}", { qos: 1 });
    // The server acks a forbidden QoS 1 publish too; it just never delivers it.
    await client.publishAsync(`scans/${otherOrg}/dock-1`, "{}", { qos: 1 });
    await eventually(async () => ((await scanSubjectsStored()).includes(`scans.${readerOrg}.dock-1`) ? true : undefined));
    expect(await scanSubjectsStored()).not.toContain(`scans.${otherOrg}.dock-1`);
    await client.endAsync();
    await expect(
      mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: String(reader.user), password: "wrong", clientId: "deploy-test-bad", reconnectPeriod: 0 }),
    ).rejects.toThrow();
  });
});
