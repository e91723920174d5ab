/**
 * The transactional outbox: every change records its CatalogEvent in the same
 * transaction; after commit the event is published to JetStream (Nats-Msg-Id
 * = event_id) before the reply, and a relay republishes whatever a crash left
 * unpublished, in order.
 */

import {
  arrayLiteral,
  CATALOG_BATCH_ENTITY,
  CATALOG_BATCH_MAX_BYTES,
  CATALOG_BATCH_VERB,
  catalogBatchSubject,
  catalogEventSubject,
  type CatalogEvent,
  currentDeadline,
  copyLiteral,
  copyOutBinary,
  newEventId,
  toWireTimestamp,
  type AssetView,
  type CatalogVerb,
  type LocationView,
  type Logger,
  type OrgSettingsRecord,
  type ScanPointView,
  type TagRecord,
  utf8Bytes,
} from "@whereabouts/shared";
import type { z } from "zod";
import { execute, inTransaction, query, queryOne, type CatalogClient, type Db, type Tx } from "../db/catalog-db.ts";

export type Verb = z.infer<typeof CatalogVerb>;

export type EventInput =
  | { entity: "asset"; verb: Verb; orgId: number; version: number; data: AssetView }
  | { entity: "location"; verb: Verb; orgId: number; version: number; data: LocationView }
  | { entity: "tag"; verb: Verb; orgId: number; version: number; data: TagRecord }
  | { entity: "settings"; verb: Verb; orgId: number; version: number; data: OrgSettingsRecord }
  | { entity: "scan_point"; verb: Verb; orgId: number; version: number; data: ScanPointView };

export interface PendingEvent {
  outboxId: string;
  eventId: string;
  subject: string;
  orgId: number;
  /** The event as JSON text: written to the outbox and published, serialized once. */
  json: string;
}

/** Sends one event; resolves once JetStream has stored it, with its stream sequence. */
export type PublishFn = (subject: string, payload: Uint8Array, msgId: string) => Promise<number>;

/**
 * Tells every gateway that an organization's catalog events are published up
 * to `seq` (the read-your-writes watermark; see packages/shared/src/consistency.ts).
 */
export type AnnounceFn = (orgId: number, seq: number) => void;

const roundAll = (times: Record<string, number>) => Object.fromEntries(Object.entries(times).map(([k, v]) => [k, Math.round(v)]));
/** Outbox rows per INSERT (four parameters each, well under the protocol's 65,535). */
const RECORD_ROWS = 1000;
/** Outbox rows the relay publishes per transaction (pipelined). */
const RELAY_BATCH = 1000;
/**
 * Payload bytes the relay reads per batch (a bulk job's batch rows are large; ordinary events about 1 kB).
 * Counted as the text that is published, not as stored: pg_column_size is the compressed size, a
 * fraction of a batch row's JSON, and counting by it let each relay batch hold several MiB.
 */
const RELAY_BATCH_BYTES = 2 * 1024 * 1024;
/**
 * A row's payload size for that budget without detoasting it: a batch row (its subject says so) as
 * its bound, CATALOG_BATCH_MAX_BYTES of event JSON; any other row as stored (small, rarely compressed).
 */
const RELAY_ROW_BYTES = `CASE WHEN subject LIKE '%.${CATALOG_BATCH_ENTITY}.${CATALOG_BATCH_VERB}' THEN ${CATALOG_BATCH_MAX_BYTES} ELSE pg_column_size(payload) END`;
/** Relay batches in flight at once (each holds a pooled connection until its acks are in). */
const RELAY_WINDOW = 3;

/**
 * The relay's claim of a batch: the oldest unpublished rows past `after` (at
 * least `minAgeMs` old), at most RELAY_BATCH rows and `maxBytes` of payload,
 * marked published and returned. The candidates are read once (MATERIALIZED),
 * each locked and then marked through the primary key, whatever the
 * statistics say: with the candidates inlined, the planner (its statistics had
 * seen every row published) ran their scan again for every unpublished row,
 * 0.6 s per batch of a bulk job's backlog after a burst of creates, and the
 * job's publishing took 10-15 s instead of 2. Run as binary COPY
 * (copyOutBinary: the payloads come back as the bytes to publish), hence
 * literals, not parameters.
 */
export const relayClaimSql = (minAgeMs: number, after: string, maxBytes: number) => `WITH candidates AS MATERIALIZED (
     SELECT id, sum(bytes) OVER (ORDER BY id) - bytes AS before
       FROM (SELECT id, ${RELAY_ROW_BYTES} AS bytes FROM catalog.outbox_events
              WHERE published_at IS NULL AND id > ${copyLiteral(after)}::bigint
                AND created_at <= now() - make_interval(secs => ${copyLiteral(minAgeMs)} / 1000.0)
              ORDER BY id LIMIT ${RELAY_BATCH}) c)
   UPDATE catalog.outbox_events o SET published_at = now()
    WHERE o.id = ANY (ARRAY(
            SELECT e.id FROM candidates c
             CROSS JOIN LATERAL (SELECT id FROM catalog.outbox_events
                                  WHERE id = c.id AND published_at IS NULL OFFSET 0 FOR UPDATE SKIP LOCKED) e
             WHERE c.before < ${copyLiteral(maxBytes)}))
    RETURNING o.id::text, o.event_id, o.subject, o.org_id::text, o.payload`;

/** A claimed outbox row: its payload as the bytes to publish. */
interface ClaimedRow {
  id: string;
  eventId: string;
  subject: string;
  orgId: number;
  payload: Uint8Array;
}

async function claimRelayBatch(tx: Tx, minAgeMs: number, after: string): Promise<ClaimedRow[]> {
  const rows = await copyOutBinary(tx, relayClaimSql(minAgeMs, after, RELAY_BATCH_BYTES));
  return rows.map(([id, eventId, subject, orgId, payload]) => ({
    id: id!.toString(),
    eventId: eventId!.toString(),
    subject: subject!.toString(),
    orgId: Number(orgId!.toString()),
    payload: payload!,
  }));
}

/** An event built and serialized, before its outbox row exists. */
export type BuiltEvent = Omit<PendingEvent, "outboxId">;

function buildEvent(input: EventInput, occurredAt = toWireTimestamp(new Date())): BuiltEvent {
  // Built from typed parts (the views come from our own SQL): no parse needed on the way out.
  const payload = {
    version: 1,
    event_id: newEventId(),
    org_id: input.orgId,
    entity: input.entity,
    entity_id: input.data.id,
    entity_version: input.version,
    verb: input.verb,
    occurred_at: occurredAt,
    data: input.data,
  } as CatalogEvent; // the union narrows by entity, which TypeScript cannot follow through EventInput
  return {
    eventId: payload.event_id,
    subject: catalogEventSubject(input.orgId, input.entity, input.verb),
    orgId: input.orgId,
    json: JSON.stringify(payload),
  };
}

/**
 * Records a unit of work's events in the outbox, inside its transaction: one
 * statement per RECORD_ROWS of them, in emit order (outbox ids order the relay).
 */
export async function recordEvents(tx: Db, events: BuiltEvent[]): Promise<PendingEvent[]> {
  if (!events.length) return [];
  const out: PendingEvent[] = [];
  for (let start = 0; start < events.length; start += RECORD_ROWS) {
    const chunk = events.slice(start, start + RECORD_ROWS);
    // One VALUES row per event, each value its own parameter: a text parameter goes out as is,
    // where an array parameter escapes every quote of every payload (a bulk job's 128 MB of JSON:
    // 1.9 s of the catalog's CPU). Rows are inserted in VALUES order (outbox ids order the relay).
    const params: unknown[] = [];
    const rows = chunk.map((e) => {
      params.push(e.eventId, e.orgId, e.subject, e.json);
      const n = params.length;
      return `($${n - 3}, $${n - 2}::int, $${n - 1}, $${n})`;
    });
    const inserted = await query<{ id: string; event_id: string }>(
      tx,
      `INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload) VALUES ${rows.join(", ")}
       RETURNING id::text AS id, event_id`,
      params,
    );
    const ids = new Map(inserted.map((r) => [r.event_id, r.id]));
    for (const e of chunk) out.push({ ...e, outboxId: ids.get(e.eventId)! });
  }
  return out;
}

/** Records events in the outbox inside `tx` at once (a bulk job's batch), for the relay to publish after commit. */
export async function recordEventInputs(tx: Db, inputs: EventInput[]): Promise<void> {
  await recordEvents(tx, inputs.map((input) => buildEvent(input)));
}

/**
 * A bulk job's events as batch messages (CatalogEventBatch): each event built
 * whole as it would travel alone, then packed in emit order, per organization,
 * into messages of at most CATALOG_BATCH_MAX_BYTES of event JSON. One outbox
 * row (and one JetStream message) per few hundred events. CPU only: a job
 * builds one chunk's messages while the database writes the next chunk.
 */
export function packEventBatches(inputs: EventInput[]): BuiltEvent[] {
  const batches: BuiltEvent[] = [];
  // One statement's events occurred together.
  const occurredAt = toWireTimestamp(new Date());
  let parts: string[] = [];
  let bytes = 0;
  let orgId: number | undefined;
  const close = () => {
    if (orgId === undefined || !parts.length) return;
    batches.push({
      eventId: newEventId(),
      subject: catalogBatchSubject(orgId),
      orgId,
      json: `{"version":1,"org_id":${orgId},"events":[${parts.join(",")}]}`,
    });
    parts = [];
    bytes = 0;
  };
  for (const input of inputs) {
    const { json } = buildEvent(input, occurredAt);
    const size = Buffer.byteLength(json);
    if (input.orgId !== orgId || bytes + size > CATALOG_BATCH_MAX_BYTES) {
      close();
      orgId = input.orgId;
    }
    parts.push(json);
    bytes += size + 1;
  }
  close();
  return batches;
}

/**
 * SQL that records a statement's own new rows as events, packed into batch
 * messages in the outbox as packEventBatches packs them, without the events
 * ever leaving Postgres (a bulk job's 130 MB of event JSON per 100,000 rows
 * was received, packed and sent back by the catalog: a third of its CPU and
 * most of its garbage). `events` names a relation of (n, entity, entity_id,
 * version, verb, data): emit order from 1, the event's parts, data as JSON
 * text. Each event is written as buildEvent writes it (a test holds the two
 * together); a message holds the events that start within one span of
 * CATALOG_BATCH_MAX_BYTES, an event over half of it a message of its own
 * (so a message stays under 1.5 times the bound). `p` names the
 * parameters, in the order eventBatchParams gives them. Yields `recorded`,
 * a row per message.
 */
export function recordEventBatchesSql(events: string, p: { orgId: string; first: number }): string {
  const [eventIds, occurredAt, subject, maxBytes] = [0, 1, 2, 3].map((i) => `$${p.first + i}`) as [string, string, string, string];
  const json = eventJsonSql("ev", "id.event_id", p.orgId, occurredAt);
  // Event ids joined by position (unnest): subscripting a text[] walks it from its start every time.
  // A message is a run of events: a new one starts where an event starts past the next multiple of
  // the bound, and around any event larger than half of it (alone in its message, as packEventBatches
  // leaves an event over the bound), so a message never exceeds 1.5 times the bound.
  return `sized AS (
       SELECT ev.n, id.event_id, j.json, octet_length(j.json) + 1 AS bytes,
              (sum(octet_length(j.json) + 1) OVER (ORDER BY ev.n) - octet_length(j.json) - 1) / ${maxBytes}::int AS span
         FROM ${events} ev JOIN unnest(${eventIds}::text[]) WITH ORDINALITY AS id(event_id, n) ON id.n = ev.n
        CROSS JOIN LATERAL (SELECT ${json} AS json) j
     ), cut AS (
       SELECT n, event_id, json, CASE WHEN lag(n) OVER w IS NULL THEN 0
                            WHEN span <> lag(span) OVER w OR bytes * 2 > ${maxBytes}::int OR lag(bytes) OVER w * 2 > ${maxBytes}::int THEN 1
                            ELSE 0 END AS starts
         FROM sized WINDOW w AS (ORDER BY n)
     ), packed AS (
       SELECT n, event_id, json, sum(starts) OVER (ORDER BY n) AS message FROM cut
     ), recorded AS (
       -- A message's id is its first event's: an event inside a message never travels alone.
       INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload)
       SELECT (array_agg(event_id ORDER BY n))[1], ${p.orgId}::int, ${subject}::text,
              '{"version":1,"org_id":' || ${p.orgId}::int || ',"events":[' || string_agg(json, ',' ORDER BY n) || ']}'
         FROM packed GROUP BY message ORDER BY message
       RETURNING 1
     )`;
}

/**
 * An event as buildEvent writes it, in SQL: `ev` a row of (entity, entity_id,
 * version, verb, data), data as JSON text (a test holds the two together).
 */
function eventJsonSql(ev: string, eventId: string, orgId: string, occurredAt: string): string {
  return `'{"version":1,"event_id":"' || ${eventId} || '","org_id":' || ${orgId}::int || ',"entity":"' || ${ev}.entity
    || '","entity_id":' || ${ev}.entity_id || ',"entity_version":' || ${ev}.version || ',"verb":"' || ${ev}.verb
    || '","occurred_at":"' || ${occurredAt}::text || '","data":' || ${ev}.data || '}'`;
}

/**
 * SQL that records a statement's own new rows as events of their own in the
 * outbox, each as buildEvent writes it, for a write done in one statement
 * (EventPublisher.writeAtOnce). `events` names a relation of (n, entity,
 * entity_id, version, verb, data) as for recordEventBatchesSql; `p` names the
 * parameters eventParams gives. Yields `recorded`: a PendingEvent's columns
 * per event, outbox ids in emit order.
 */
export function recordEventsSql(events: string, p: { orgId: string; first: number }): string {
  const [eventIds, subjects, occurredAt] = [0, 1, 2].map((i) => `$${p.first + i}`) as [string, string, string];
  return `recorded AS (
       INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload)
       SELECT e.event_id, ${p.orgId}::int, e.subject, ${eventJsonSql("ev", "e.event_id", p.orgId, occurredAt)}
         FROM ${events} ev JOIN unnest(${eventIds}::text[], ${subjects}::text[]) WITH ORDINALITY AS e(event_id, subject, n) ON e.n = ev.n
        ORDER BY ev.n
       RETURNING id::text AS outbox_id, event_id, subject, org_id, payload AS json
     )`;
}

/** recordEventsSql's parameters for events of these kinds, in emit order: an id and a subject each, the time. */
export function eventParams(orgId: number, kinds: ReadonlyArray<{ entity: EventInput["entity"]; verb: Verb }>): unknown[] {
  return [
    arrayLiteral(kinds.map(() => newEventId())),
    arrayLiteral(kinds.map((k) => catalogEventSubject(orgId, k.entity, k.verb))),
    toWireTimestamp(new Date()),
  ];
}

/** A row of `recorded` (recordEventsSql) as read back. */
export interface RecordedEventRow {
  outbox_id: string;
  event_id: string;
  subject: string;
  org_id: number;
  json: string;
}

/** The rows of `recorded` as the events to publish, in outbox (emit) order. */
export function recordedEvents(rows: readonly RecordedEventRow[]): PendingEvent[] {
  return rows
    .map((r) => ({ outboxId: r.outbox_id, eventId: r.event_id, subject: r.subject, orgId: r.org_id, json: r.json }))
    .sort((a, b) => Number(a.outboxId) - Number(b.outboxId));
}

/** recordEventBatchesSql's parameters for `events` events: an id each, the time, the subject, the bound. */
export function eventBatchParams(orgId: number, events: number): unknown[] {
  return [arrayLiteral(Array.from({ length: events }, () => newEventId())), toWireTimestamp(new Date()), catalogBatchSubject(orgId), CATALOG_BATCH_MAX_BYTES];
}

/** Records events as batch messages (packEventBatches) in the outbox inside `tx`; returns how many messages. */
export async function recordEventBatches(tx: Db, inputs: EventInput[]): Promise<number> {
  const batches = packEventBatches(inputs);
  await recordEvents(tx, batches);
  return batches.length;
}

/** Emits events from inside a unit of work. */
export type Emit = (input: EventInput) => Promise<void>;

export interface EventPublisher {
  /** Runs `work` in a transaction with an outbox, then publishes what it emitted. */
  write<T>(work: (tx: Tx, emit: Emit) => Promise<T>): Promise<T>;
  /**
   * A write done in one statement, its own transaction, that records its
   * events itself (recordEventsSql): runs it on the pool, then publishes them.
   * Saves the round trips of BEGIN, each statement and COMMIT.
   */
  writeAtOnce<T>(work: (db: CatalogClient) => Promise<{ value: T; events: PendingEvent[] }>): Promise<T>;
  /** Publishes every unpublished event older than `minAgeMs`, oldest first. */
  relay(minAgeMs?: number): Promise<number>;
  /**
   * Publishes the whole backlog now, in order and in batches, and resolves
   * once nothing committed before the call is left unpublished (rows another
   * replica's relay holds are waited for).
   */
  flush(): Promise<void>;
  /** Events committed but not yet published (the backlog metric). */
  backlog(): Promise<number>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createEventPublisher(deps: {
  db: CatalogClient;
  publish: PublishFn;
  announce: AnnounceFn;
  logger: Logger;
  relayIntervalMs: number;
}): EventPublisher {
  const { db, publish, announce, logger } = deps;

  /** The newest sequence per organization among published events: one announcement each. */
  function announceAll(published: Array<{ orgId: number; seq: number }>) {
    const newest = new Map<number, number>();
    for (const { orgId, seq } of published) newest.set(orgId, Math.max(seq, newest.get(orgId) ?? 0));
    for (const [orgId, seq] of newest) announce(orgId, seq);
  }
  let timer: NodeJS.Timeout | undefined;
  let relaying: Promise<number> | undefined;

  /**
   * Published outbox rows, marked in one statement per flush rather than one
   * transaction (and WAL flush) per write. A mark lost to a crash only makes
   * the relay publish the event again, de-duplicated by Nats-Msg-Id.
   */
  const unmarked = new Set<string>();
  let marking: Promise<void> | undefined;
  let markTimer: NodeJS.Timeout | undefined;
  const MARK_DELAY_MS = 20;
  const MARK_BATCH_MAX = 1000;
  function flushMarks(): Promise<void> {
    clearTimeout(markTimer);
    markTimer = undefined;
    if (!unmarked.size) return marking ?? Promise.resolve();
    const ids = [...unmarked];
    unmarked.clear();
    const previous = marking ?? Promise.resolve();
    const run = previous
      .then(() =>
        execute(
          db,
          `UPDATE catalog.outbox_events SET published_at = now()
            WHERE id = ANY($1::bigint[]) AND published_at IS NULL`,
          [ids],
        ),
      )
      .then(
        () => undefined,
        (err: unknown) => logger.warn({ err, events: ids.length }, "could not mark events published"),
      )
      .finally(() => {
        if (marking === run) marking = undefined;
      });
    marking = run;
    return run;
  }
  function markPublished(ids: string[]) {
    for (const id of ids) unmarked.add(id);
    if (unmarked.size >= MARK_BATCH_MAX) void flushMarks();
    else markTimer ??= setTimeout(() => void flushMarks(), MARK_DELAY_MS);
  }

  /**
   * Publishes a write's events, pipelined (one connection keeps their order),
   * announces the watermark, and marks the outbox rows without making the
   * reply wait for it: a row left unmarked by a crash is published again by
   * the relay, and Nats-Msg-Id de-duplicates it.
   */
  async function publishCommitted(events: PendingEvent[]): Promise<void> {
    const results = await Promise.allSettled(
      events.map((event) => publish(event.subject, utf8Bytes(event.json), event.eventId)),
    );
    const done: string[] = [];
    const published: Array<{ orgId: number; seq: number }> = [];
    results.forEach((result, i) => {
      if (result.status !== "fulfilled") return;
      done.push(events[i]!.outboxId);
      published.push({ orgId: events[i]!.orgId, seq: result.value });
    });
    announceAll(published);
    if (done.length < events.length) {
      // Committed but not published: the relay delivers it (in order) later.
      const failed = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      logger.error({ err: failed.reason, pending: events.length - done.length }, "event publish failed; left to the outbox relay");
      scheduleRelay(1000, 0);
    }
    if (done.length) markPublished(done);
  }

  /**
   * One batch of the backlog, oldest first, published pipelined on the one
   * connection (JetStream stores them in that order). The payload goes out as
   * the text we wrote, unparsed: it was built from typed parts, as in `write`.
   * The batch is claimed by marking it in the same statement that reads it (one
   * row version per event, no separate lock and mark); the mark commits only
   * once every publish is acked, and a publish that fails rolls the batch back.
   * Nats-Msg-Id de-duplicates the retry. `claimed` resolves once the rows are
   * held and their publishes issued (the next batch may start), `done` at commit.
   */
  function relayBatch(minAgeMs: number, after: string): { claimed: Promise<{ n: number; last: string }>; done: Promise<void> } {
    let claim!: (batch: { n: number; last: string }) => void;
    const claimed = new Promise<{ n: number; last: string }>((resolve) => (claim = resolve));
    const started = performance.now();
    const done = inTransaction(db, async (tx) => {
      // From past the last row this run published: the rows it just marked stay in the partial
      // index as dead entries until vacuum, and scanning them again each batch grows quadratically.
      // At most RELAY_BATCH rows, and only as many as fit RELAY_BATCH_BYTES (published size; at least
      // one): a bulk job's batch rows hold hundreds of events each, and the batch is held in memory.
      const rows = await claimRelayBatch(tx, minAgeMs, after);
      // RETURNING keeps no order: publish in outbox order (ids are far below 2^53).
      rows.sort((a, b) => Number(a.id) - Number(b.id));
      const claimedAt = performance.now();
      const acks = Promise.all(rows.map((row) => publish(row.subject, row.payload, row.eventId)));
      claim({ n: rows.length, last: rows.at(-1)?.id ?? after });
      const seqs = await acks;
      announceAll(rows.map((row, i) => ({ orgId: row.orgId, seq: seqs[i]! })));
      relayMs.claim += claimedAt - started;
      relayMs.acks += performance.now() - claimedAt;
    });
    return { claimed: Promise.race([claimed, done.then(() => ({ n: 0, last: after }))]), done };
  }

  /**
   * The backlog as a window of batches in flight: the next batch is read and
   * its publishes issued while earlier ones still await their acks and marks
   * (each batch keeps its own transaction, so a failed one alone rolls back).
   * Publishes are issued batch after batch on one connection: order is kept.
   */
  let relayMs = { claim: 0, acks: 0 };
  async function relayAll(minAgeMs: number): Promise<number> {
    const started = performance.now();
    relayMs = { claim: 0, acks: 0 };
    let total = 0;
    let after = "0";
    const window: Array<Promise<void>> = [];
    try {
      for (;;) {
        const batch = relayBatch(minAgeMs, after);
        window.push(batch.done);
        const { n, last } = await batch.claimed;
        total += n;
        after = last;
        // A batch may be cut short by bytes, not only by rows: done once one finds nothing.
        if (n === 0) break;
        if (window.length >= RELAY_WINDOW) await window.shift();
      }
    } finally {
      const settled = await Promise.allSettled(window);
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
      // eslint-disable-next-line no-unsafe-finally -- the first failed batch is the relay's error
      if (failed) throw failed.reason;
    }
    // Summed over the batches in flight (they overlap): where a backlog's time goes.
    if (total) logger.debug({ events: total, ms: Math.round(performance.now() - started), batch_ms: roundAll(relayMs) }, "outbox relay run");
    return total;
  }

  const relay = (minAgeMs = 0): Promise<number> => {
    relaying ??= relayAll(minAgeMs).finally(() => (relaying = undefined));
    return relaying;
  };

  let stopped = false;
  /** Periodic runs leave the newest second to the requests publishing it. */
  function scheduleRelay(delayMs = deps.relayIntervalMs, minAgeMs = 1000) {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      relay(minAgeMs)
        .then((n) => n && logger.info({ relayed: n }, "outbox relay published events"))
        .catch((err: unknown) => logger.error({ err }, "outbox relay failed"))
        .finally(() => scheduleRelay());
    }, delayMs);
    timer.unref?.();
  }

  return {
    async write(work) {
      let pending: PendingEvent[] = [];
      // The RPC caller's deadline: past it, the write rolls back rather than commit unseen.
      const result = await inTransaction(
        db,
        async (tx) => {
          // Events are built when emitted and recorded together just before commit.
          const built: BuiltEvent[] = [];
          const value = await work(tx, async (input) => {
            built.push(buildEvent(input));
          });
          pending = await recordEvents(tx, built);
          return value;
        },
        { deadline: currentDeadline() },
      );
      if (pending.length) await publishCommitted(pending);
      return result;
    },
    async writeAtOnce(work) {
      const { value, events } = await work(db);
      if (events.length) await publishCommitted(events);
      return value;
    },
    relay,
    async flush() {
      const last = await queryOne<{ id: string | null }>(db, `SELECT max(id)::text AS id FROM catalog.outbox_events`);
      if (!last?.id) return;
      for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
        await relay(0);
        const left = await queryOne<{ n: number }>(
          db,
          `SELECT count(*)::int AS n FROM (SELECT 1 FROM catalog.outbox_events WHERE published_at IS NULL AND id <= $1::bigint LIMIT 1) s`,
          [last.id],
        );
        if (!left?.n) return;
        // Held by a relay running elsewhere (or one in flight here that started before our rows): look again shortly.
        await new Promise((r) => setTimeout(r, wait));
      }
    },
    async backlog() {
      const row = await queryOne<{ n: number }>(db, `SELECT count(*)::int AS n FROM catalog.outbox_events WHERE published_at IS NULL`);
      return row?.n ?? 0;
    },
    async start() {
      try {
        const n = await relay(0);
        if (n) logger.info({ relayed: n }, "outbox relay published events left by a previous run");
      } catch (err) {
        // JetStream unavailable now: serve anyway, the periodic relay retries.
        logger.error({ err }, "outbox relay failed at start");
      }
      scheduleRelay();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await relaying?.catch(() => undefined);
      await flushMarks();
    },
  };
}
