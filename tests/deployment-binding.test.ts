/**
 * Streams bound to their database (deployment.ts), in process against a
 * private nats-server: the migrator gives every schema one deployment id; the
 * first stack on a broker claims its streams; another deployment is refused
 * with the fix in the message; of two claiming at once one wins; streams made
 * before deployment ids are adopted; deleteStreams clears them.
 */
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  bindDeployment,
  DATA_STREAMS,
  openUploads,
  DeploymentMismatchError,
  deleteStreams,
  ensureStreams,
  readDeploymentId,
  readStreamsDeployment,
  scanSubject,
  STREAMS,
} from "@whereabouts/shared";
import { startTestNats, type TestNats } from "@whereabouts/shared/testing";
import { migrateAll, SCHEMAS } from "../scripts/migrate.ts";
import { startupDatabase, type StartupDatabase } from "./start-support.ts";

let nats: TestNats;
let nc: NatsConnection;
const databases: StartupDatabase[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc?.close();
  await nats?.destroy();
  await Promise.all(databases.map((db) => db.drop()));
});
beforeEach(async () => {
  await deleteStreams(nc);
});

async function migratedDatabase(label: string): Promise<{ url: string; id: string }> {
  const db = await startupDatabase(label);
  databases.push(db);
  const { deploymentId } = await migrateAll({ DATABASE_URL: db.url }, () => undefined);
  return { url: db.url, id: deploymentId };
}

describe("the deployment id in the database", () => {
  it("is one id in every service schema, kept by later migrations", async () => {
    const db = await migratedDatabase("record");
    const ids = await Promise.all(SCHEMAS.map(({ schema }) => readDeploymentId(db.url, schema)));
    expect(new Set(ids)).toEqual(new Set([db.id]));
    const again = await migrateAll({ DATABASE_URL: db.url }, () => undefined);
    expect(again.deploymentId).toBe(db.id);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // One row, enforced by the table.
      await expect(client.query(`INSERT INTO catalog.deployment (singleton, deployment_id) VALUES (false, 'x')`)).rejects.toThrow(/deployment_one_row/);
    } finally {
      await client.end();
    }
  });

  it("two databases get different ids", async () => {
    const [a, b] = await Promise.all([migratedDatabase("ids_a"), migratedDatabase("ids_b")]);
    expect(a.id).not.toBe(b.id);
  });
});

describe("bindDeployment", () => {
  it("claims a broker that has no deployment, then accepts the same deployment again", async () => {
    const first = await bindDeployment(nc, "dep-a");
    expect(first).toEqual({ claimed: true, adoptedStreams: [] });
    expect((await readStreamsDeployment(await jetstreamManager(nc)))?.deployment_id).toBe("dep-a");
    expect(await bindDeployment(nc, "dep-a")).toEqual({ claimed: false, adoptedStreams: [] });
  });

  it("refuses another deployment, naming both and both fixes", async () => {
    await bindDeployment(nc, "dep-a");
    const err = await bindDeployment(nc, "dep-b").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeploymentMismatchError);
    const message = (err as Error).message;
    expect(message).toContain("belong to deployment dep-a");
    expect(message).toContain("this database belongs to deployment dep-b");
    expect(message).toMatch(/STREAM_PREFIX=\S+/);
    expect(message).toContain("npm run -s reset-streams");
    expect(message).toContain("--yes");
    // The record is untouched.
    expect((await readStreamsDeployment(await jetstreamManager(nc)))?.deployment_id).toBe("dep-a");
  });

  it("of two deployments claiming at once, exactly one wins", async () => {
    const conns = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })]);
    try {
      const results = await Promise.allSettled([bindDeployment(conns[0]!, "dep-x"), bindDeployment(conns[1]!, "dep-y")]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const refused = results.find((r) => r.status === "rejected");
      expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(DeploymentMismatchError);
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
  });

  it("adopts streams that hold events but no deployment (made before deployment ids), and says which", async () => {
    await ensureStreams(nc);
    await jetstream(nc).publish(scanSubject(1, "reader"), "{}");
    const outcome = await bindDeployment(nc, "dep-old");
    expect(outcome).toEqual({ claimed: true, adoptedStreams: [STREAMS.SCANS.name] });
  });
});

describe("deleteStreams", () => {
  it("deletes every stream of the stack and the deployment record; the next bind claims anew", async () => {
    await bindDeployment(nc, "dep-a");
    await ensureStreams(nc);
    await openUploads(nc);
    const jsm = await jetstreamManager(nc);
    const deleted = await deleteStreams(nc);
    expect(deleted.sort()).toEqual([...DATA_STREAMS, STREAMS.DEPLOYMENT.name].sort());
    const left: string[] = [];
    for await (const info of jsm.streams.list()) left.push(info.config.name);
    expect(left).toEqual([]);
    expect(await deleteStreams(nc)).toEqual([]);
    expect(await bindDeployment(nc, "dep-b")).toEqual({ claimed: true, adoptedStreams: [] });
  });
});
