/**
 * Durable pull consumers, run in batches: fetch what is available (up to the
 * batch size), hand it to the handler, which commits and then acks. A failed
 * batch is nak'ed with a delay; a message past its delivery limit is the
 * handler's to dead-letter. Replicas share the durable, so they share the work.
 *
 * `waitForConsumer` blocks until everything the stream held when it was
 * called has been acked by the durable (its ack floor), i.e. is committed in
 * the consumer's database: tracking calls it once per scan batch ("catalog
 * writes come first"), tests call it to wait for eventual effects. API reads
 * never call it: they wait through consistency.ts, and only for their
 * organization's catalog writes. Consumers used that way are unfiltered so
 * the ack floor moves over every stream sequence.
 */
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerConfig,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { deadLetterEvent, type EventRefusal } from "./dead-letter.ts";
import { AppError, serviceUnavailable } from "./errors.ts";
import type { Metrics } from "./metrics.ts";
import type { Worker } from "./service.ts";
import { logicalSubject, STREAM_PREFIX, wireSubject } from "./subjects.ts";

export type { JsMsg };

export interface ConsumerSpec {
  stream: string;
  durable: string;
  /** In the contracts' terms (`tracking.events.*.asset.*`); the stack's STREAM_PREFIX is added here. Omit for catch-up consumers (see above). */
  filterSubjects?: string[];
  ackWaitMs: number;
  maxDeliver: number;
  batchSize: number;
  /**
   * Bytes of message data per batch (at least one message), and twice that in
   * hand: streams whose messages may each carry many events (a bulk job's
   * CatalogEventBatch) keep batches, transactions and memory bounded by this.
   */
  maxBatchBytes?: number;
  /** Messages pulled at once (default twice batchSize): with large messages, what the client may hold in flight. */
  pullMessages?: number;
  /**
   * How long a batch may wait for more messages before it starts, ms (default
   * CONSUMER_LINGER_MS; 0: never), and only while messages keep coming: when
   * the previous batch ended less than this ago. Each batch pays a transaction,
   * its statements and a commit whatever its size, so under a stream of single
   * writes (API creates, 500 a second) the replicas spent most of their time on
   * batches of one or two. A lone message after a quiet spell starts at once.
   */
  lingerMs?: number;
}

/** See ConsumerSpec.lingerMs. */
export const CONSUMER_LINGER_MS = 10;

/**
 * The linger of consumers of scan data (SCANS, and positions on TRACKING):
 * readers' scans arrive as a steady trickle, and at 10 ms a batch held a few
 * of them, so each read paid a share of a transaction, its statements and a
 * commit in three services. At 5,000 reads/s the stack spent 17-19% less CPU
 * with 50 ms, scan-to-visible p99 117-124 -> 195-316 ms (the target is 1 s). Scan
 * data carry no read-your-writes promise (ARCHITECTURE.md rule 4); catalog
 * events, which API reads may wait for, keep CONSUMER_LINGER_MS.
 */
export const SCAN_DATA_LINGER_MS = 50;

export async function ensureConsumer(jsm: JetStreamManager, spec: ConsumerSpec): Promise<void> {
  const config: Partial<ConsumerConfig> = {
    durable_name: spec.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: spec.ackWaitMs * 1_000_000,
    max_deliver: spec.maxDeliver,
    max_ack_pending: Math.max(1000, spec.batchSize * 4),
    ...(spec.filterSubjects?.length === 1
      ? { filter_subject: wireSubject(spec.filterSubjects[0]!) }
      : spec.filterSubjects?.length
        ? { filter_subjects: spec.filterSubjects.map(wireSubject) }
        : {}),
  };
  try {
    await jsm.consumers.info(spec.stream, spec.durable);
    await jsm.consumers.update(spec.stream, spec.durable, config);
  } catch (err) {
    if (!(err instanceof Error) || !/not found/i.test(err.message)) throw err;
    await jsm.consumers.add(spec.stream, config);
  }
}

/**
 * The message as handlers see it: its subject without the stack's
 * STREAM_PREFIX, so parsers read `scans.<org_id>.<source>` on every stack.
 * Everything else (ack, nak, term, info) is the message's own, through the
 * prototype; the consumer hands out and settles this one object only.
 */
function inContractTerms(msg: JsMsg): JsMsg {
  if (!STREAM_PREFIX) return msg;
  return Object.create(msg, { subject: { value: logicalSubject(msg.subject), enumerable: true }}) as JsMsg;
}

/** What a handler settles a message with besides ack. */
export interface BatchSettlement {
  /** Poison: onto DEAD_LETTERS as this durable's, with the reason, then terminated (dead-letter.ts). */
  deadLetter(msg: JsMsg, reason: EventRefusal, detail: string): Promise<void>;
}

/**
 * Handles one batch. It must settle every message it is given (ack after its
 * commit, or `deadLetter` for poison); throwing instead naks the unsettled
 * ones, except those on their last delivery, which are dead-lettered as
 * `delivery_limit` rather than dropped by JetStream's max_deliver.
 */
export type BatchHandler = (messages: JsMsg[], settle: BatchSettlement) => Promise<void>;

export async function runBatchConsumer(options: {
  nc: NatsConnection;
  spec: ConsumerSpec;
  handle: BatchHandler;
  logger: Logger;
  /** Delay before a failed batch is redelivered. */
  retryDelayMs?: number;
  /** Counts processed and failed messages, times batches, and samples the durable's lag at each scrape. */
  metrics?: Metrics;
}): Promise<Worker & { processed(): number; buffered(): number }> {
  const { nc, spec, logger, metrics } = options;
  const jsm = await jetstreamManager(nc);
  await ensureConsumer(jsm, spec);
  const labels = { stream: spec.stream, durable: spec.durable };
  const unwatch = metrics?.watchConsumerLag(spec.stream, spec.durable, () => jsm.consumers.info(spec.stream, spec.durable));
  const js = jetstream(nc);
  const consumer = await js.consumers.get(spec.stream, spec.durable);
  const settlement: BatchSettlement = {
    deadLetter: async (msg, reason, detail) => {
      await deadLetterEvent(js, spec.durable, msg, reason, detail);
      logger.error({ durable: spec.durable, stream_seq: msg.seq, subject: msg.subject, reason, detail }, "event dead-lettered");
      metrics?.consumerDeadLettered.inc({ ...labels, reason });
    },
  };
  // Pulled by message count only: a pull bounded by bytes stalls (until missed heartbeats, 30 s and
  // more) when its remaining bytes are fewer than the next message's. `pullMessages` bounds large messages.
  const messages = await consumer.consume({ max_messages: spec.pullMessages ?? spec.batchSize * 2 });
  const byteLimit = spec.maxBatchBytes ?? Number.POSITIVE_INFINITY;

  const buffer: JsMsg[] = [];
  let bufferedBytes = 0;
  let wake: (() => void) | undefined;
  let resume: (() => void) | undefined;
  let ended = false;
  let stopping = false;
  let processed = 0;
  const lingerMs = spec.lingerMs ?? CONSUMER_LINGER_MS;
  let lastBatchEnded = Number.NEGATIVE_INFINITY;

  // Reader: moves delivered messages into a bounded buffer. Once stopping,
  // whatever still arrives goes straight back, so it never holds the ack floor
  // until its ack wait runs out.
  const reader = (async () => {
    try {
      for await (const msg of messages) {
        if (stopping) {
          msg.nak();
          continue;
        }
        buffer.push(inContractTerms(msg));
        bufferedBytes += msg.data.length;
        wake?.();
        wake = undefined;
        if (buffer.length >= spec.batchSize * 2 || bufferedBytes >= byteLimit * 2) await new Promise<void>((r) => (resume = r));
      }
    } catch (err) {
      logger.error({ err, durable: spec.durable }, "consumer stopped");
    } finally {
      ended = true;
      wake?.();
    }
  })();

  const loop = (async () => {
    for (;;) {
      if (buffer.length === 0) {
        if (ended || stopping) return;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      if (lingerMs > 0 && performance.now() - lastBatchEnded < lingerMs) await lingerForMore();
      let take = 0;
      let bytes = 0;
      while (take < buffer.length && take < spec.batchSize && (take === 0 || bytes + buffer[take]!.data.length <= byteLimit)) bytes += buffer[take++]!.data.length;
      const batch = buffer.splice(0, take);
      bufferedBytes -= bytes;
      resume?.();
      resume = undefined;
      const started = performance.now();
      try {
        await options.handle(batch, settlement);
        processed += batch.length;
        metrics?.consumerProcessed.inc(labels, batch.length);
        metrics?.consumerBatchDuration.observe({ ...labels, outcome: "ok" }, (performance.now() - started) / 1000);
      } catch (err) {
        // A batch that waits for another part of the stack (a read model catching up: 503) is routine while that
        // part is busy, a bulk import's events say: a warning. Anything else is an error.
        if (err instanceof AppError && err.type === "service_unavailable") {
          logger.warn({ durable: spec.durable, size: batch.length, reason: err.detail }, "batch waits for the stack to catch up; will be redelivered");
        } else logger.error({ err, durable: spec.durable, size: batch.length }, "batch failed; will be redelivered");
        const detail = err instanceof Error ? err.message : String(err);
        for (const msg of batch) {
          // JetStream would never deliver it again: keep it, with the last error.
          if (spec.maxDeliver > 0 && msg.info.deliveryCount >= spec.maxDeliver) await settlement.deadLetter(msg, "delivery_limit", detail).catch(() => msg.nak(options.retryDelayMs ?? 1000));
          else msg.nak(options.retryDelayMs ?? 1000);
        }
        metrics?.consumerFailed.inc(labels, batch.length);
        metrics?.consumerBatchDuration.observe({ ...labels, outcome: "failed" }, (performance.now() - started) / 1000);
      }
      lastBatchEnded = performance.now();
    }
  })();

  /** Waits up to lingerMs for a full batch (by count or bytes), the end of the stream, or stop. */
  async function lingerForMore(): Promise<void> {
    const until = performance.now() + lingerMs;
    while (buffer.length < spec.batchSize && bufferedBytes < byteLimit && !ended && !stopping) {
      const left = until - performance.now();
      if (left <= 0) return;
      await new Promise<void>((r) => {
        const timer = setTimeout(r, left);
        wake = () => {
          clearTimeout(timer);
          r();
        };
      });
      wake = undefined;
    }
  }

  return {
    processed: () => processed,
    /** Messages delivered and waiting for a batch (tests wait on it instead of on time). */
    buffered: () => buffer.length,
    async stop() {
      stopping = true;
      unwatch?.();
      await messages.close();
      wake?.();
      resume?.();
      await loop;
      await Promise.race([reader, new Promise((r) => setTimeout(r, 2000))]);
      // Whatever was buffered but not started goes back to the stream.
      for (const msg of buffer.splice(0)) msg.nak();
      bufferedBytes = 0;
    },
  };
}

/**
 * Waits until the durable has acked everything the stream held at the call.
 * Throws 503 service_unavailable after `timeoutMs`.
 */
export async function waitForConsumer(
  jsm: JetStreamManager,
  stream: string,
  durable: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let target: number | undefined;
  let delay = 2;
  for (;;) {
    let info;
    try {
      info = await jsm.consumers.info(stream, durable);
    } catch {
      info = undefined;
    }
    if (info) {
      target ??= info.delivered.stream_seq + info.num_pending;
      if (info.ack_floor.stream_seq >= target) return;
    }
    if (Date.now() >= deadline) throw serviceUnavailable("The read model is catching up; retry shortly", 1);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 50);
  }
}

