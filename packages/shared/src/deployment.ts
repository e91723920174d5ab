/**
 * Streams bound to their database. A stack's database and its streams must
 * belong together: a fresh database against streams that still hold another
 * stack's events would resolve those events against the wrong organizations
 * and locations (ids collide), and rebuild its replicas from them.
 *
 * - The migrator records a deployment id in every service's schema (one row in
 *   `<schema>.deployment`), the same id in each: `recordDeployment`.
 * - Each process, before it creates or uses a stream, compares the id of its
 *   own schema with the one in the DEPLOYMENT stream (subjects.ts):
 *   `bindDeployment`. The first process of a stack on a broker claims it;
 *   a process of another deployment refuses to start (DeploymentMismatchError).
 */
import pg from "pg";
import { jetstream, jetstreamManager, DiscardPolicy, StorageType, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { z } from "zod";
import { quoteIdent } from "./db.ts";
import { pooledUlid } from "./random.ts";
import { toWireTimestamp } from "./rules/instant.ts";
import { sqlStateOf } from "./sql.ts";
import { DATA_STREAMS, STREAM_PREFIX, STREAMS } from "./subjects.ts";

/** What the DEPLOYMENT stream holds, and what a schema's row says. */
export const DeploymentRecord = z.object({
  deployment_id: z.string().min(1),
  created_at: z.string(),
});
export type DeploymentRecord = z.infer<typeof DeploymentRecord>;

/** The other deployment's streams are on the broker: starting would mix two stacks. */
export class DeploymentMismatchError extends Error {
  override readonly name = "DeploymentMismatchError";
  constructor(
    readonly ours: string,
    readonly theirs: DeploymentRecord,
    where: string,
  ) {
    super(
      [
        `The streams on ${where} (${DATA_STREAMS.join(", ")}) belong to deployment ${theirs.deployment_id}` +
          ` (since ${theirs.created_at}), but this database belongs to deployment ${ours}.`,
        "Refusing to start: the two stacks would read each other's events.",
        "Fix it in one of two ways:",
        `  - give this stack streams of its own on that broker: set STREAM_PREFIX (now ${STREAM_PREFIX ? `"${STREAM_PREFIX}"` : "unset"}) to a new name, e.g. STREAM_PREFIX=${suggestedPrefix()};`,
        "  - or delete the other deployment's streams and every event in them: npm run -s reset-streams (asks for confirmation; --yes for scripts).",
      ].join("\n"),
    );
  }
}

function suggestedPrefix(): string {
  return `stack-${pooledUlid().slice(-6).toLowerCase()}`;
}

/** The schema has no deployment row (or no table): the migrator has not run. */
export class DeploymentMissingError extends Error {
  override readonly name = "DeploymentMissingError";
}

/* ---------- the database side ---------- */

async function readRow(client: pg.ClientBase, schema: string): Promise<DeploymentRecord | undefined> {
  const { rows } = await client.query<{ deployment_id: string; created_at: Date }>(
    `SELECT deployment_id, created_at FROM ${quoteIdent(schema)}.deployment`,
  );
  const row = rows[0];
  return row && { deployment_id: row.deployment_id, created_at: toWireTimestamp(row.created_at) };
}

/** The deployment this schema belongs to; DeploymentMissingError when it has none yet. */
export async function readDeploymentId(connectionString: string, schema: string): Promise<string> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    const row = await readRow(client, schema).catch((err: unknown) => {
      // 42P01: no such table, i.e. migrations older than deployment ids.
      if (sqlStateOf(err) === "42P01") return undefined;
      throw err;
    });
    if (!row) throw new DeploymentMissingError(`Schema ${schema} records no deployment: run the migrations first (npm run migrate)`);
    return row.deployment_id;
  } finally {
    await client.end();
  }
}

/**
 * Gives every schema the same deployment row: the id one of them already has,
 * or a new one on a fresh database. Runs after the migrations, under a lock so
 * two migrators on one fresh database agree on one id.
 */
export async function recordDeployment(targets: ReadonlyArray<{ connectionString: string; schema: string }>): Promise<string> {
  const clients = new Map<string, pg.Client>();
  const clientFor = async (url: string) => {
    let client = clients.get(url);
    if (!client) {
      client = new pg.Client({ connectionString: url });
      clients.set(url, client);
      await client.connect();
    }
    return client;
  };
  const lockKey = "whereabouts:deployment";
  try {
    const first = await clientFor(targets[0]!.connectionString);
    await first.query("SELECT pg_advisory_lock(hashtext($1))", [lockKey]);
    try {
      const found = new Map<string, DeploymentRecord | undefined>();
      for (const t of targets) found.set(t.schema, await readRow(await clientFor(t.connectionString), t.schema));
      const ids = new Set([...found.values()].flatMap((r) => (r ? [r.deployment_id] : [])));
      if (ids.size > 1) {
        throw new Error(`The service schemas record different deployments (${[...ids].join(", ")}): they were not migrated together`);
      }
      const id = [...ids][0] ?? pooledUlid();
      for (const t of targets) {
        if (found.get(t.schema)) continue;
        await (await clientFor(t.connectionString)).query(`INSERT INTO ${quoteIdent(t.schema)}.deployment (deployment_id) VALUES ($1)`, [id]);
      }
      return id;
    } finally {
      await first.query("SELECT pg_advisory_unlock(hashtext($1))", [lockKey]).catch(() => undefined);
    }
  } finally {
    await Promise.all([...clients.values()].map((c) => c.end().catch(() => undefined)));
  }
}

/* ---------- the broker side ---------- */

const DEPLOYMENT_SUBJECT = STREAMS.DEPLOYMENT.subjects[0];

async function ensureDeploymentStream(jsm: JetStreamManager, replicas: number): Promise<void> {
  const config = {
    name: STREAMS.DEPLOYMENT.name,
    subjects: [...STREAMS.DEPLOYMENT.subjects],
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    num_replicas: replicas,
  };
  if (await jsm.streams.info(config.name).then(() => true, () => false)) return;
  await jsm.streams.add(config).catch((err: unknown) => {
    // Processes booting together race to create it.
    if (!(err instanceof Error) || !/already in use/i.test(err.message)) throw err;
  });
}

/** The deployment the broker's streams belong to, if one has claimed them. */
export async function readStreamsDeployment(jsm: JetStreamManager): Promise<DeploymentRecord | undefined> {
  let stored;
  try {
    stored = await jsm.streams.getMessage(STREAMS.DEPLOYMENT.name, { last_by_subj: DEPLOYMENT_SUBJECT });
  } catch (err) {
    if (err instanceof Error && /not found/i.test(err.message)) return undefined;
    throw err;
  }
  if (!stored) return undefined;
  const parsed = DeploymentRecord.safeParse(stored.json());
  if (!parsed.success) throw new Error(`Stream ${STREAMS.DEPLOYMENT.name} holds something that is not a deployment record`);
  return parsed.data;
}

export interface BindOutcome {
  /** This process wrote the deployment id (the broker had none for this STREAM_PREFIX). */
  claimed: boolean;
  /** Data streams existed before any deployment claimed them (made by a version without deployment ids). */
  adoptedStreams: string[];
}

/**
 * Binds this stack's streams to `deploymentId`, or throws
 * DeploymentMismatchError when they belong to another deployment. Call it
 * before creating or using any stream.
 */
export async function bindDeployment(nc: NatsConnection, deploymentId: string, options: { replicas?: number } = {}): Promise<BindOutcome> {
  const jsm = await jetstreamManager(nc);
  await ensureDeploymentStream(jsm, options.replicas ?? 1);
  const where = `NATS ${nc.getServer()}`;
  const check = (record: DeploymentRecord) => {
    if (record.deployment_id !== deploymentId) throw new DeploymentMismatchError(deploymentId, record, where);
  };
  const existing = await readStreamsDeployment(jsm);
  if (existing) {
    check(existing);
    return { claimed: false, adoptedStreams: [] };
  }
  const adoptedStreams: string[] = [];
  for (const name of DATA_STREAMS) {
    const info = await jsm.streams.info(name).catch(() => undefined);
    if (info && info.state.messages > 0) adoptedStreams.push(name);
  }
  const record: DeploymentRecord = { deployment_id: deploymentId, created_at: toWireTimestamp(new Date()) };
  try {
    // Written only if nothing is there yet: of two stacks claiming at once, one wins.
    await jetstream(nc).publish(DEPLOYMENT_SUBJECT, JSON.stringify(record), { expect: { lastSubjectSequence: 0 } });
  } catch (err) {
    if (!(err instanceof Error) || !/wrong last sequence/i.test(err.message)) throw err;
    const winner = await readStreamsDeployment(jsm);
    if (!winner) throw err;
    check(winner);
    return { claimed: false, adoptedStreams: [] };
  }
  return { claimed: true, adoptedStreams };
}

/**
 * Deletes this stack's streams (for the current STREAM_PREFIX) and its
 * deployment record: every event in them is gone. The next start claims new
 * streams for its database. Returns the names of the streams deleted.
 */
export async function deleteStreams(nc: NatsConnection): Promise<string[]> {
  const jsm = await jetstreamManager(nc);
  const deleted: string[] = [];
  // SCANS_DLQ sources SCANS: the sourcing stream first; the deployment record last.
  const order = [STREAMS.SCANS_DLQ.name, ...DATA_STREAMS.filter((name) => name !== STREAMS.SCANS_DLQ.name), STREAMS.DEPLOYMENT.name];
  for (const name of order) {
    const gone = await jsm.streams.delete(name).catch((err: unknown) => {
      if (err instanceof Error && /not found/i.test(err.message)) return false;
      throw err;
    });
    if (gone) deleted.push(name);
  }
  return deleted;
}

/**
 * For process entries: binds the streams to the deployment of `schema`'s
 * database (logging a claim), or logs why it cannot and exits 1, so an
 * operator reads the fix rather than a stack trace.
 */
export async function bindDeploymentOrExit(options: {
  nc: NatsConnection;
  databaseUrl: string;
  schema: string;
  logger: Logger;
  replicas?: number;
}): Promise<void> {
  const { logger } = options;
  try {
    const deploymentId = await readDeploymentId(options.databaseUrl, options.schema);
    const outcome = await bindDeployment(options.nc, deploymentId, { replicas: options.replicas ?? 1 });
    if (outcome.claimed) logger.info({ deployment_id: deploymentId, stream_prefix: STREAM_PREFIX }, "streams bound to this deployment");
    if (outcome.adoptedStreams.length) {
      logger.warn({ streams: outcome.adoptedStreams }, "streams made before deployment ids existed now belong to this deployment");
    }
  } catch (err) {
    if (!(err instanceof DeploymentMismatchError) && !(err instanceof DeploymentMissingError)) throw err;
    logger.fatal(err.message);
    process.exit(1);
  }
}
