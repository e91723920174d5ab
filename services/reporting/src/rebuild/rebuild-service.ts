/**
 * Rebuild: the read model from the streams, into fresh tables, swapped in
 * while the endpoint keeps answering.
 *
 * 1. Fresh tables in schema `reporting_build`, cloned from the live ones
 *    (columns, defaults, constraints, triggers, and after the load every index
 *    with its exact name), so the swapped-in tables match schema.prisma and
 *    the migrations. The trigger functions stay in `reporting`; they write the
 *    counts table of the schema their table is in.
 * 2. Replay CATALOG and TRACKING from their first sequence with ordered
 *    (ephemeral) consumers through the same projection code as the live
 *    consumers; then build the secondary indexes and ANALYZE.
 * 3. Catch up outside any lock until the remaining tail is small.
 * 4. Swap, in one transaction: take the swap lock exclusively (live consumer
 *    batches hold it shared, so none is half-applied), replay the tail up to
 *    the streams' last sequences (everything the live tables hold is at or
 *    below them), move the live tables to `reporting_retired` and the build
 *    tables to `reporting`. Readers wait only for the renames (milliseconds);
 *    live batches resume on the new tables, where re-applying is a no-op.
 * 5. Drop `reporting_retired` and `reporting_build`.
 */
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { checkout, createPool, isLockConflict, logicalSubject, STREAMS, type Logger, type NatsConnection } from "@whereabouts/shared";
import { PoisonMessageError, ProjectionBatch, type StreamKind } from "../projection/projection-service.ts";
import {
  BUILD_SCHEMA,
  createProjectionStore,
  LIVE_SCHEMA,
  READ_MODEL_TABLES,
  RETIRED_SCHEMA,
} from "../projection/projection-store.ts";
import { takeSwapLockExclusive, TX_OPTIONS, type ReportingDb, type SqlRunner } from "../reporting-db.ts";

const REBUILD_LOCK = "whereabouts:reporting:rebuild";
const STREAM_OF: Record<StreamKind, string> = { catalog: STREAMS.CATALOG.name, tracking: STREAMS.TRACKING.name };
const KINDS: StreamKind[] = ["catalog", "tracking"];

export interface RebuildFigures {
  status: "ok";
  catalog_messages: number;
  tracking_messages: number;
  unusable_messages: number;
  catalog_last_seq: number;
  tracking_last_seq: number;
  assets: number;
  locations: number;
  tags: number;
  report_rows: number;
  replay_ms: number;
  index_ms: number;
  /** Time the swap transaction held the swap lock (live consumers paused). */
  swap_ms: number;
  total_ms: number;
}

export interface RebuildDeps {
  nc: NatsConnection;
  db: ReportingDb;
  /** For the session-level lock that keeps rebuilds from overlapping. */
  databaseUrl: string;
  logger: Logger;
  batchSize?: number;
  /** Test hook: runs after the replay, before the swap. */
  beforeSwap?: () => Promise<void>;
}

export async function rebuildReadModel(deps: RebuildDeps): Promise<RebuildFigures> {
  const started = Date.now();
  const lockPool = createPool(deps.databaseUrl, 1);
  const lockClient = await checkout(lockPool);
  try {
    const { rows } = await lockClient.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [REBUILD_LOCK]);
    if (!rows[0]?.ok) throw new Error("another reporting rebuild is running");
    try {
      return await rebuild(deps, started);
    } finally {
      await lockClient.query("SELECT pg_advisory_unlock(hashtext($1))", [REBUILD_LOCK]);
    }
  } finally {
    lockClient.release();
    await lockPool.end();
  }
}

async function rebuild(deps: RebuildDeps, started: number): Promise<RebuildFigures> {
  const { db, logger } = deps;
  const js = jetstream(deps.nc);
  const jsm = await jetstreamManager(deps.nc);
  const store = createProjectionStore(BUILD_SCHEMA);
  const batchSize = deps.batchSize ?? 2000;
  const figures = { catalog: 0, tracking: 0, unusable: 0 };
  const cursor: Record<StreamKind, number> = { catalog: 0, tracking: 0 };

  const replayTo = async (ends: Record<StreamKind, number>, tx?: SqlRunner) => {
    for (const kind of KINDS) {
      const read = await replay(js, jsm, kind, cursor[kind] + 1, ends[kind], batchSize, async (batch) => {
        if (tx) await batch.apply(tx, store);
        else await db.$transaction((t) => batch.apply(t, store), TX_OPTIONS);
      });
      figures[kind] += read.messages;
      figures.unusable += read.unusable;
      cursor[kind] = Math.max(cursor[kind], ends[kind]);
    }
  };

  await dropScratchSchemas(db);
  await db.$executeRawUnsafe(`CREATE SCHEMA "${BUILD_SCHEMA}"`);
  try {
    await createBuildTables(db);
    const replayStarted = Date.now();
    await replayTo(await streamEnds(jsm));
    const replayMs = Date.now() - replayStarted;
    logger.info({ ...figures }, "rebuild: replayed");

    const indexStarted = Date.now();
    await createBuildIndexes(db);
    for (const table of READ_MODEL_TABLES) await db.$executeRawUnsafe(`ANALYZE "${BUILD_SCHEMA}"."${table}"`);
    const indexMs = Date.now() - indexStarted;

    // Catch up without blocking anyone until the tail is short.
    for (let i = 0; i < 5; i++) {
      const ends = await streamEnds(jsm);
      const behind = KINDS.reduce((n, k) => n + ends[k] - cursor[k], 0);
      if (behind === 0) break;
      await replayTo(ends);
      if (behind < 500) break;
    }
    await deps.beforeSwap?.();

    // A failed swap rolls back the tail it replayed: rewind to retry it.
    let swapMs: number;
    for (let attempt = 1; ; attempt++) {
      const saved = { cursor: { ...cursor }, figures: { ...figures } };
      try {
        swapMs = await swap(db, jsm, replayTo);
        break;
      } catch (err) {
        Object.assign(cursor, saved.cursor);
        Object.assign(figures, saved.figures);
        // Readers hold the live tables briefly and in their own order: a swap that
        // could not lock them all at once gives way and tries again.
        if (attempt >= (isLockConflict(err) ? 50 : 3)) throw err;
        logger.warn({ err, attempt }, "rebuild: swap failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 80));
      }
    }
    await dropScratchSchemas(db);

    const [counts] = await db.$queryRawUnsafe<Array<Record<string, number>>>(
      `SELECT (SELECT count(*)::int FROM "${LIVE_SCHEMA}".assets) AS assets,
              (SELECT count(*)::int FROM "${LIVE_SCHEMA}".locations) AS locations,
              (SELECT count(*)::int FROM "${LIVE_SCHEMA}".tags) AS tags,
              (SELECT count(*)::int FROM "${LIVE_SCHEMA}".assets
                WHERE scanned AND external_key IS NOT NULL) AS report_rows`,
    );
    return {
      status: "ok",
      catalog_messages: figures.catalog,
      tracking_messages: figures.tracking,
      unusable_messages: figures.unusable,
      catalog_last_seq: cursor.catalog,
      tracking_last_seq: cursor.tracking,
      assets: counts?.assets ?? 0,
      locations: counts?.locations ?? 0,
      tags: counts?.tags ?? 0,
      report_rows: counts?.report_rows ?? 0,
      replay_ms: replayMs,
      index_ms: indexMs,
      swap_ms: swapMs,
      total_ms: Date.now() - started,
    };
  } catch (err) {
    await dropScratchSchemas(db).catch(() => undefined);
    throw err;
  }
}

async function swap(
  db: ReportingDb,
  jsm: JetStreamManager,
  replayTo: (ends: Record<StreamKind, number>, tx?: SqlRunner) => Promise<void>,
): Promise<number> {
  return db.$transaction(async (tx) => {
    await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '10s'`);
    await takeSwapLockExclusive(tx);
    // All live tables at once, before anything else. Report reads lock them in
    // another order (positions before assets, counts first): waiting on one
    // while holding another could deadlock, so give up quickly instead.
    await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '200ms'`);
    await tx.$executeRawUnsafe(
      `LOCK TABLE ${READ_MODEL_TABLES.map((t) => `"${LIVE_SCHEMA}"."${t}"`).join(", ")} IN ACCESS EXCLUSIVE MODE`,
    );
    await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '10s'`);
    const locked = Date.now();
    // Live batches are paused: whatever the live tables hold is in the streams up to here.
    await replayTo(await streamEnds(jsm), tx);
    await tx.$executeRawUnsafe(`CREATE SCHEMA "${RETIRED_SCHEMA}"`);
    for (const table of READ_MODEL_TABLES) {
      await tx.$executeRawUnsafe(`ALTER TABLE "${LIVE_SCHEMA}"."${table}" SET SCHEMA "${RETIRED_SCHEMA}"`);
    }
    for (const table of READ_MODEL_TABLES) {
      await tx.$executeRawUnsafe(`ALTER TABLE "${BUILD_SCHEMA}"."${table}" SET SCHEMA "${LIVE_SCHEMA}"`);
    }
    return Date.now() - locked;
  }, TX_OPTIONS);
}

async function streamEnds(jsm: JetStreamManager): Promise<Record<StreamKind, number>> {
  const [catalog, tracking] = await Promise.all(KINDS.map((k) => jsm.streams.info(STREAM_OF[k])));
  return { catalog: catalog!.state.last_seq, tracking: tracking!.state.last_seq };
}

/** Reads [from, to] of a stream in batches; each batch is reduced then applied. */
async function replay(
  js: JetStreamClient,
  jsm: JetStreamManager,
  kind: StreamKind,
  from: number,
  to: number,
  batchSize: number,
  apply: (batch: ProjectionBatch) => Promise<void>,
): Promise<{ messages: number; unusable: number }> {
  const result = { messages: 0, unusable: 0 };
  if (to < from) return result;
  const stream = STREAM_OF[kind];
  const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from });
  let seq = from - 1;
  let idle = 0;
  while (seq < to) {
    const batch = new ProjectionBatch();
    let got = 0;
    const messages = await consumer.fetch({ max_messages: Math.min(batchSize, to - seq), expires: 2000 });
    for await (const msg of messages) {
      if (msg.seq > to) continue;
      seq = msg.seq;
      got++;
      try {
        batch.add(kind, logicalSubject(msg.subject), msg.data);
      } catch (err) {
        if (!(err instanceof PoisonMessageError)) throw err;
        result.unusable++;
      }
    }
    result.messages += got;
    if (batch.size) await apply(batch);
    if (got === 0) {
      // Nothing left to read below `to` (a gap at the end of the stream), or a slow server.
      const info = await jsm.streams.info(stream);
      if (info.state.last_seq <= seq || ++idle >= 5) break;
    }
  }
  await consumer.delete().catch(() => undefined);
  return result;
}

async function dropScratchSchemas(db: SqlRunner): Promise<void> {
  await db.$executeRawUnsafe(`DROP SCHEMA IF EXISTS "${RETIRED_SCHEMA}" CASCADE`);
  await db.$executeRawUnsafe(`DROP SCHEMA IF EXISTS "${BUILD_SCHEMA}" CASCADE`);
}

/**
 * Columns, defaults, NOT NULL/CHECK, primary and unique constraints (with
 * their names) and triggers of the live tables.
 */
async function createBuildTables(db: ReportingDb): Promise<void> {
  for (const table of READ_MODEL_TABLES) {
    await db.$executeRawUnsafe(
      `CREATE TABLE "${BUILD_SCHEMA}"."${table}"
         (LIKE "${LIVE_SCHEMA}"."${table}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS)`,
    );
    const constraints = await db.$queryRawUnsafe<Array<{ name: string; def: string }>>(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE conrelid = $1::regclass AND contype IN ('p', 'u') ORDER BY conname`,
      `"${LIVE_SCHEMA}"."${table}"`,
    );
    for (const c of constraints) {
      await db.$executeRawUnsafe(`ALTER TABLE "${BUILD_SCHEMA}"."${table}" ADD CONSTRAINT "${c.name}" ${c.def}`);
    }
    // Storage parameters (positions' fillfactor): LIKE does not copy them.
    const [options] = await db.$queryRawUnsafe<Array<{ reloptions: string[] | null }>>(
      `SELECT reloptions FROM pg_class WHERE oid = $1::regclass`,
      `"${LIVE_SCHEMA}"."${table}"`,
    );
    if (options?.reloptions?.length) {
      await db.$executeRawUnsafe(`ALTER TABLE "${BUILD_SCHEMA}"."${table}" SET (${options.reloptions.join(", ")})`);
    }
  }
  // Triggers (the counts), before the load so the counts follow every batch.
  await db.$transaction(async (tx) => {
    await tx.$executeRawUnsafe(`SET LOCAL search_path TO pg_catalog`);
    for (const table of READ_MODEL_TABLES) {
      const triggers = await tx.$queryRawUnsafe<Array<{ def: string }>>(
        `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname`,
        `"${LIVE_SCHEMA}"."${table}"`,
      );
      for (const trigger of triggers) await tx.$executeRawUnsafe(retarget(trigger.def, table));
    }
  }, TX_OPTIONS);
}

/** A live table's index or trigger definition, aimed at its build twin. */
function retarget(definition: string, table: string): string {
  const on = ` ON ${LIVE_SCHEMA}.${table} `;
  if (!definition.includes(on)) throw new Error(`unexpected definition: ${definition}`);
  return definition.replace(on, ` ON ${BUILD_SCHEMA}.${table} `);
}

/** Every other index of the live tables, same name and definition, built after the bulk load. */
async function createBuildIndexes(db: ReportingDb): Promise<void> {
  await db.$transaction(async (tx) => {
    // Fully qualified definitions (table schema, operator classes).
    await tx.$executeRawUnsafe(`SET LOCAL search_path TO pg_catalog`);
    for (const table of READ_MODEL_TABLES) {
      const indexes = await tx.$queryRawUnsafe<Array<{ name: string; def: string }>>(
        `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE i.indrelid = $1::regclass
            AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
          ORDER BY c.relname`,
        `"${LIVE_SCHEMA}"."${table}"`,
      );
      for (const index of indexes) await tx.$executeRawUnsafe(retarget(index.def, table));
    }
  }, TX_OPTIONS);
}

