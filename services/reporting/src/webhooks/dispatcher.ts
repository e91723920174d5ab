/**
 * Webhook delivery (EXTENSIONS.md section 4). Delivery state lives in
 * Postgres, so any number of reporting replicas share the work and a restart
 * loses nothing:
 *
 * - claim: a replica leases due deliveries (`FOR UPDATE SKIP LOCKED`), only
 *   the head of each (webhook, ordering key) chain, so one asset's events go
 *   out in order, and at most `perTarget` per webhook, so a slow receiver
 *   holds its own slots and never the others';
 * - send: a signed POST, 2xx within the timeout is delivered; redirects are
 *   not followed; the address dialled is checked (target-guard.ts);
 * - record: outcomes are written in batches, with one attempt row each; a
 *   finished delivery's row is deleted (its attempt rows are its record);
 *   a failure is retried with exponential backoff and jitter (1 s doubling,
 *   capped at 1 h) until 24 h after the event, then `failed`.
 *
 * A replica that dies mid-delivery leaves a lease that expires; another then
 * sends again (at least once; counted in whereabouts_webhook_takeovers_total).
 */
import { Pool as HttpPool, type Dispatcher } from "undici";
import {
  WEBHOOK_RETRY_WINDOW_MS,
  WEBHOOK_TIMEOUT_MS,
  unnestColumns,
  type Logger,
  type Metrics,
  type Pool,
  type Worker,
} from "@whereabouts/shared";
import { signatureHeader, SIGNATURE_HEADER } from "./signature.ts";
import { TargetRefusedError, type TargetGuard } from "./target-guard.ts";

export interface DispatcherOptions {
  /**
   * The claim and the outcome writes go through `pg`, without the ORM's
   * per-row result mapping (they carry every delivery). Unnamed statements on
   * purpose: a named one gets a generic plan after five runs, and one made
   * while the table was empty (a new webhook) scanned it whole per candidate.
   */
  pool: Pool;
  guard: TargetGuard;
  logger: Logger;
  metrics?: Metrics;
  /** Requests in flight in this replica, across webhooks. */
  concurrency?: number;
  /** Requests in flight in this replica, per webhook. */
  perTarget?: number;
  timeoutMs?: number;
  /** Requests sent ahead on one connection before the first answer (HTTP/1.1 pipelining); 1: none. */
  pipelining?: number;
  /** How often due work (retries, other replicas' events) is looked for, besides pokes. */
  pollMs?: number;
}

/** As `pg` returns them: bigint columns as strings. */
interface Claimed {
  id: string;
  webhook_id: number;
  org_id: number;
  attempts: number;
  created_at: Date;
  ordering_key: string;
  event_seq: string;
  taken_over: boolean;
  /** Due rows the claim's scan read (the same on every row). */
  scanned: number;
  url: string | null;
  secret: string | null;
  previous_secret: string | null;
  event_id: string | null;
  type: string | null;
  occurred_at: string | null;
  data: string | null;
  recorded_at: Date | null;
}

interface Outcome {
  id: string;
  webhookId: number;
  orgId: number;
  eventId: string;
  eventType: string;
  attempt: number;
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
  state: "pending" | "delivered" | "failed";
  nextAttemptAt: Date | null;
  orderingKey: string;
  eventSeq: string;
}

/** The longest wait between two attempts (EXTENSIONS.md section 4: capped at 1 h). */
export const RETRY_DELAY_CAP_MS = 3600_000;

/**
 * The retry schedule: 1 s doubling, plus up to 25 % jitter (never earlier
 * than the schedule), and never more than the cap, jitter included.
 */
export function retryDelayMs(attempt: number, random = Math.random()): number {
  const base = Math.min(1000 * 2 ** Math.max(0, attempt - 1), RETRY_DELAY_CAP_MS);
  return Math.min(Math.round(base * (1 + 0.25 * random)), RETRY_DELAY_CAP_MS);
}

const USER_AGENT = "Whereabouts-Webhooks/1";
const SIGNATURE_HEADER_NAME = SIGNATURE_HEADER.toLowerCase();
/** Parsed webhook urls (one per webhook, each used for every delivery); cleared when it grows past this. */
const URL_CACHE_MAX = 10_000;
/** A webhook's connections close after this long without a request. */
const POOL_IDLE_MS = 60_000;
/** Deliveries leased by one claim statement. */
const CLAIM_MAX = 1000;

export function startWebhookDispatcher(options: DispatcherOptions): Worker & { poke(): void } {
  const { pool, logger, metrics } = options;
  const concurrency = options.concurrency ?? 1024;
  const perTarget = options.perTarget ?? 32;
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  // Held past the request's timeout by a margin for recording it; then another replica may take it.
  const leaseS = Math.ceil(timeoutMs / 1000) + 5;
  const pollMs = options.pollMs ?? 250;
  const pipelining = options.pipelining ?? 1;

  let stopped = false;
  let inFlight = 0;
  /**
   * Leased and not yet recorded (in flight, or answered and waiting for the
   * outcome write). Capped, so claims stop when the writes fall behind: an
   * outcome waiting past its lease would let the delivery be sent again.
   */
  let unrecorded = 0;
  /** A pump found no free slot: the next recorded outcome pumps again. */
  let heldBack = false;
  const perWebhook = new Map<number, number>();
  let claiming: Promise<void> | undefined;
  let again = false;
  const outcomes: Outcome[] = [];
  let flushing: Promise<void> | undefined;
  const sends = new Set<Promise<void>>();

  /**
   * One statement: the due chain heads, locked as they are scanned without
   * waiting for rows another replica holds, at most the webhook's free slots
   * of each (none of a saturated one), leased (found again by their row
   * address, no index lookups), and returned with their webhook and event.
   *
   * The scan reads as many rows as it may claim: in the due order, webhooks
   * interleave (an event queues one delivery per webhook), so nearly every row
   * scanned is claimed. When one webhook fills the front of the order, the
   * claim comes back shorter than its scan and the next one runs at once,
   * that webhook then saturated and skipped.
   */
  async function claim(limit: number): Promise<Claimed[]> {
    const busy = [...perWebhook];
    const saturated = busy.filter(([, n]) => n >= perTarget).map(([id]) => id);
    const { rows } = await pool.query<Claimed>({
      // The scan is a function: its planner settings force the walk in due order (see its migration).
      text: `WITH scanned AS (
         SELECT * FROM reporting.webhook_due_heads($1::int[], $3)
       ), candidates AS (
         SELECT c.tid, c.taken_over
           FROM (SELECT s.*, row_number() OVER (PARTITION BY s.webhook_id ORDER BY s.next_attempt_at, s.id) AS rank FROM scanned s) c
           LEFT JOIN unnest($5::int[], $6::int[]) AS b(webhook_id, n) ON b.webhook_id = c.webhook_id
          WHERE c.rank <= $2 - coalesce(b.n, 0)
       ), claimed AS (
         -- The rows are locked by this statement: their address cannot change under it.
         UPDATE reporting.webhook_deliveries d
            SET lease_until = now() + make_interval(secs => $4), attempts = d.attempts + 1
           FROM candidates c
          WHERE d.ctid = ANY (ARRAY(SELECT tid FROM candidates)) AND d.ctid = c.tid
         RETURNING d.id, d.webhook_id, d.org_id, d.attempts, d.created_at, d.ordering_key, d.event_seq, c.taken_over
       )
       SELECT c.*, (SELECT count(*) FROM scanned)::int AS scanned, w.url, w.secret,
              CASE WHEN w.previous_secret_until > now() THEN w.previous_secret END AS previous_secret,
              e.id AS event_id, e.type, e.occurred_at, e.data::text AS data, e.recorded_at
         FROM claimed c
         LEFT JOIN reporting.webhooks w ON w.id = c.webhook_id AND w.deleted_at IS NULL
         LEFT JOIN reporting.partner_events e ON e.seq = c.event_seq
        ORDER BY c.id`,
      values: [saturated, perTarget, limit, leaseS, busy.map(([id]) => id), busy.map(([, n]) => n)],
    });
    return rows;
  }

  function pump(): void {
    if (stopped) return;
    if (claiming) {
      again = true;
      return;
    }
    const free = Math.min(concurrency - inFlight, 2 * concurrency - unrecorded);
    if (free <= 0) {
      heldBack = true;
      return;
    }
    const claimStarted = performance.now();
    claiming = claim(Math.min(free, CLAIM_MAX))
      .then((rows) => {
        if (rows.length) logger.debug({ rows: rows.length, free, ms: Math.round(performance.now() - claimStarted) }, "webhook deliveries claimed");
        // An event goes to every webhook subscribed to it with the same body: rendered once per claim.
        const bodies = new Map<string, Buffer>();
        for (const row of rows) start(row, bodies);
        // Full, or short because some webhooks had no free slot for all they had due (see claim): look again.
        if (rows.length && (rows.length >= Math.min(free, CLAIM_MAX) || rows[0]!.scanned > rows.length)) again = true;
      })
      .catch((err: unknown) => logger.warn({ err }, "claiming webhook deliveries failed; next round retries"))
      .finally(() => {
        claiming = undefined;
        if (again) {
          again = false;
          setImmediate(pump);
        }
      });
  }

  function start(row: Claimed, bodies: Map<string, Buffer>): void {
    inFlight++;
    unrecorded++;
    perWebhook.set(row.webhook_id, (perWebhook.get(row.webhook_id) ?? 0) + 1);
    if (row.taken_over) metrics?.webhookTakeovers.inc();
    // The slot frees when the answer is in; the lease keeps the delivery (and its chain) until the outcome is written.
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      inFlight--;
      const left = (perWebhook.get(row.webhook_id) ?? 1) - 1;
      if (left > 0) perWebhook.set(row.webhook_id, left);
      else perWebhook.delete(row.webhook_id);
    };
    const send = deliver(row, bodies)
      .then((outcome) => {
        release();
        return record(outcome);
      })
      .catch((err: unknown) => {
        release();
        logger.error({ err, delivery: String(row.id) }, "webhook delivery crashed");
      })
      .finally(() => {
        unrecorded--;
        sends.delete(send);
        if (heldBack) {
          heldBack = false;
          pump();
        }
      });
    sends.add(send);
  }

  async function deliver(row: Claimed, bodies: Map<string, Buffer>): Promise<Outcome> {
    const base = {
      id: row.id,
      webhookId: row.webhook_id,
      orgId: row.org_id,
      eventId: row.event_id ?? "",
      eventType: row.type ?? "",
      attempt: row.attempts,
      orderingKey: row.ordering_key,
      eventSeq: row.event_seq,
    };
    if (row.url === null || row.secret === null || row.event_id === null) {
      const why = row.url === null ? "the webhook was deleted" : "the event is past retention";
      return { ...base, statusCode: null, durationMs: null, error: why, state: "failed", nextAttemptAt: null };
    }
    let body = bodies.get(row.event_seq);
    if (body === undefined) {
      body = Buffer.from(`${JSON.stringify({ id: row.event_id, type: row.type, occurred_at: row.occurred_at, org_id: row.org_id }).slice(0, -1)},"data":${row.data}}`);
      bodies.set(row.event_seq, body);
    }
    const started = Date.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    let timedOut = false;
    try {
      options.guard.checkLiteral(row.url);
      const secrets = row.previous_secret ? [row.secret, row.previous_secret] : [row.secret];
      statusCode = await post(row.webhook_id, row.url, body, {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "whereabouts-event-id": row.event_id,
        "whereabouts-event-type": row.type ?? "",
        "whereabouts-delivery-attempt": String(row.attempts),
        [SIGNATURE_HEADER_NAME]: signatureHeader(secrets, Math.floor(started / 1000), body),
      });
      if (statusCode < 200 || statusCode > 299) error = statusCode >= 300 && statusCode < 400 ? "redirects are not followed" : null;
    } catch (err) {
      timedOut = err instanceof AttemptTimedOut;
      error = err instanceof TargetRefusedError ? `refused: ${err.message}` : err instanceof Error ? err.message : String(err);
    }
    // A timer counts from the event loop's cached time, which can be a millisecond behind
    // `started`: a timed-out attempt lasted the whole timeout, whatever the clocks say.
    let durationMs = Date.now() - started;
    if (timedOut) durationMs = Math.max(durationMs, timeoutMs);
    if (statusCode !== null && statusCode >= 200 && statusCode <= 299) {
      if (row.recorded_at) metrics?.webhookLag.observe((Date.now() - row.recorded_at.getTime()) / 1000);
      return { ...base, statusCode, durationMs, error: null, state: "delivered", nextAttemptAt: null };
    }
    const next = new Date(Date.now() + retryDelayMs(row.attempts));
    const expired = next.getTime() - row.created_at.getTime() > WEBHOOK_RETRY_WINDOW_MS;
    return { ...base, statusCode, durationMs, error, state: expired ? "failed" : "pending", nextAttemptAt: expired ? null : next };
  }

  /**
   * One undici pool per webhook, as many connections as it may have requests
   * in flight: its requests never queue behind another webhook's (several may
   * share an origin), and a hanging receiver holds only its own connections.
   * undici costs far less per request than node:http (measured with the
   * drain script), and never follows redirects.
   */
  const pools = new Map<number, { origin: string; client: HttpPool; usedAt: number }>();
  function poolFor(webhookId: number, target: URL): HttpPool {
    const origin = target.origin;
    const held = pools.get(webhookId);
    if (held && held.origin === origin) {
      held.usedAt = Date.now();
      return held.client;
    }
    // The webhook's url moved to another origin: the old pool finishes what it has, then closes.
    if (held) void held.client.close().catch(() => undefined);
    const client = new HttpPool(origin, {
      connections: perTarget,
      pipelining,
      // Backstops only: the deadline below covers the whole exchange.
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connect: { timeout: timeoutMs, ...(options.guard.lookup ? { lookup: options.guard.lookup } : {}) },
    });
    pools.set(webhookId, { origin, client, usedAt: Date.now() });
    return client;
  }
  /** Pools of webhooks that sent nothing for a while (deleted, or quiet) are closed. */
  function closeIdlePools(): void {
    const before = Date.now() - POOL_IDLE_MS;
    for (const [id, held] of pools) {
      if (held.usedAt >= before || perWebhook.has(id)) continue;
      pools.delete(id);
      void held.client.close().catch(() => undefined);
    }
  }

  const urls = new Map<string, URL>();
  function parsed(url: string): URL {
    let target = urls.get(url);
    if (!target) {
      if (urls.size >= URL_CACHE_MAX) urls.clear();
      target = new URL(url);
      urls.set(url, target);
    }
    return target;
  }

  /** The answer's status code; rejects on a network error or no complete answer within the timeout. */
  function post(webhookId: number, url: string, body: Buffer, headers: Record<string, string>): Promise<number> {
    const target = parsed(url);
    const client = poolFor(webhookId, target);
    return new Promise<number>((resolve, reject) => {
      let settled = false;
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      const settle = (err: Error | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        if (err) reject(err);
        else resolve(status);
      };
      // One timer for the whole exchange, waiting for a connection included.
      const deadline = setTimeout(() => {
        const err = new AttemptTimedOut(controller ? `no answer within ${timeoutMs} ms` : `no connection within ${timeoutMs} ms`);
        settle(err);
        controller?.abort(err);
      }, timeoutMs);
      client.dispatch(
        {
          origin: target.origin,
          path: target.pathname + target.search,
          method: "POST",
          headers,
          body,
          // A delivery may be sent again (at least once), so it may share a connection's pipeline.
          idempotent: true,
          blocking: false,
        },
        {
          onRequestStart(c) {
            controller = c;
            // Timed out while waiting for a connection: not sent at all.
            if (settled) c.abort(new Error("timed out"));
          },
          onResponseStart(_c, statusCode) {
            status = statusCode;
          },
          // The answer's body is not read beyond draining it.
          onResponseData() {},
          onResponseEnd() {
            settle(null);
          },
          onResponseError(_c, err) {
            settle(err);
          },
        },
      );
    });
  }

  function record(outcome: Outcome): Promise<void> {
    metrics?.webhookAttempts.inc({ outcome: outcome.state === "pending" ? "retry" : outcome.state });
    outcomes.push(outcome);
    return flush();
  }

  /**
   * Writes the outcomes gathered so far in one statement (one flush at a time;
   * callers wait for theirs). One at a time on purpose: while a write runs the
   * next batch grows, and a row costs less in a big batch. With three at once
   * (measured on the webhooks bench case) batches were half the size, each
   * took as long, and the statements' summed time was two to three times as
   * long, with no gain in deliveries/s on a busy 2-core machine.
   */
  function flush(): Promise<void> {
    if (flushing) return flushing.then(() => (outcomes.length ? flush() : undefined));
    const batch = outcomes.splice(0);
    if (!batch.length) return Promise.resolve();
    flushing = write(batch)
      .catch((err: unknown) => {
        // The leases expire and the deliveries go out again: at least once.
        logger.error({ err, outcomes: batch.length }, "recording webhook outcomes failed");
      })
      .finally(() => {
        flushing = undefined;
        pump();
      });
    return flushing;
  }

  /**
   * One statement: the deliveries' new state, their attempt rows, and the
   * push-back of what waits behind a retry. A finished delivery (delivered or
   * failed) is deleted, not updated: its attempt rows are its record (the API
   * lists those), and a delete writes no new row version and no index entries,
   * where changing `state` (in every partial index's predicate) wrote both.
   */
  async function write(batch: Outcome[]): Promise<void> {
    const started = performance.now();
    await pool.query({
      text: `WITH o AS (
         SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[], $9::text[],
                              $10::text[], $11::timestamptz[], $12::text[], $13::bigint[])
                AS o(id, webhook_id, org_id, event_id, event_type, attempt, status_code, duration_ms, error, state, next_at, ordering_key, event_seq)
       ), finished AS (
         DELETE FROM reporting.webhook_deliveries d
          WHERE d.id = ANY (ARRAY(SELECT id FROM o WHERE state <> 'pending'))
       ), retried AS (
         UPDATE reporting.webhook_deliveries d SET next_attempt_at = o.next_at, lease_until = NULL
           FROM o WHERE d.id = ANY (ARRAY(SELECT id FROM o WHERE state = 'pending')) AND d.id = o.id
         RETURNING d.id
       ), logged AS (
         INSERT INTO reporting.webhook_attempts
           (delivery_id, webhook_id, org_id, event_id, event_type, attempt, status_code, duration_ms, error, state, next_attempt_at)
         SELECT id, webhook_id, org_id, event_id, event_type, attempt, status_code, duration_ms, error, state, next_at FROM o
       )
       -- What waits behind a failed head is not due before it (keeps the due scan to heads).
       UPDATE reporting.webhook_deliveries s SET next_attempt_at = o.next_at
         FROM o
        WHERE o.state = 'pending' AND s.webhook_id = o.webhook_id AND s.ordering_key = o.ordering_key AND s.state = 'pending'
          AND s.event_seq > o.event_seq AND s.next_attempt_at < o.next_at AND s.id NOT IN (SELECT id FROM retried)`,
      values: unnestColumns(batch, "id", "webhookId", "orgId", "eventId", "eventType", "attempt", "statusCode", "durationMs",
        "error", "state", "nextAttemptAt", "orderingKey", "eventSeq"),
    });
    logger.debug({ outcomes: batch.length, ms: Math.round(performance.now() - started) }, "webhook outcomes recorded");
  }

  const timer = setInterval(pump, pollMs);
  timer.unref();
  const sweeper = setInterval(closeIdlePools, POOL_IDLE_MS);
  sweeper.unref();
  pump();

  return {
    poke: () => pump(),
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearInterval(sweeper);
      await claiming;
      // In-flight requests finish (within the timeout) and their outcomes are written.
      await Promise.all([...sends]);
      await flush();
      await Promise.all([...pools.values()].map((held) => held.client.destroy()));
      pools.clear();
    },
  };
}

/** No complete answer (or no connection) within the timeout. */
class AttemptTimedOut extends Error {}
