/**
 * Prometheus metrics: one registry per process (or per test), holding every
 * metric the services share. Code records into it through the `Metrics`
 * object its composition root hands down; values that live elsewhere
 * (consumer lag, outbox backlog, pool use) are sampled when scraped, from
 * sources registered with the `watch*` methods. A source that cannot be read
 * within the scrape budget reports NaN (unknown), never a stale number.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type CounterConfiguration, type HistogramConfiguration } from "prom-client";

/** Seconds; RPC_TIMEOUT_MS is 5 s by default. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const BATCH_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// A count and the duration of the same work carry the same labels, so the two can be joined.
const RPC_LABELS = ["subject", "status"] as const;
const HTTP_LABELS = ["method", "route", "status"] as const;
/** A JetStream consumer: its stream and durable name. */
const CONSUMER_LABELS = ["stream", "durable"] as const;
/** Longest a scrape waits for one sampled source. */
const SAMPLE_TIMEOUT_MS = 2000;

/** What a consumer-lag source reports: JetStream consumer info's counters. */
export interface ConsumerLagInfo {
  num_pending: number;
  num_ack_pending: number;
}

/** A pg Pool, or anything with its counters. */
export interface PoolStats {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
  options?: { max?: number };
}

export interface Metrics {
  readonly registry: Registry;
  readonly service: string;
  /** `whereabouts_rpc_requests_total{subject,status}`: RPCs answered by this process. */
  readonly rpcRequests: Counter<"subject" | "status">;
  readonly rpcDuration: Histogram<"subject" | "status">;
  /** Gateway: `whereabouts_http_requests_total{method,route,status}`, route as its pattern. */
  readonly httpRequests: Counter<"method" | "route" | "status">;
  readonly httpDuration: Histogram<"method" | "route" | "status">;
  /** Gateway: requests refused with 429, per API key id. */
  readonly rateLimited: Counter<"key_id">;
  readonly consumerProcessed: Counter<"stream" | "durable">;
  /** Messages of batches that failed (nak'ed for redelivery). */
  readonly consumerFailed: Counter<"stream" | "durable">;
  readonly consumerDeadLettered: Counter<"stream" | "durable" | "reason">;
  readonly consumerBatchDuration: Histogram<"stream" | "durable" | "outcome">;
  /** Messages moved to a dead-letter stream, per reason. */
  readonly deadLettered: Counter<"reason">;
  /** Webhook delivery attempts, per outcome (delivered, retry, failed). */
  readonly webhookAttempts: Counter<"outcome">;
  /** Deliveries taken over after the replica sending them stopped (the receiver may get them twice). */
  readonly webhookTakeovers: Counter;
  /** From an event's recording to its delivery (2xx). */
  readonly webhookLag: Histogram;
  /** History rows removed by an organization's retention. */
  readonly historyRowsRemoved: Counter;
  /** Alerts recorded as partner events (zone.entered, zone.exited, asset.dwell_exceeded, asset.missing). */
  readonly alertsFired: Counter<"type">;
  /** Samples `num_pending + num_ack_pending` of a durable at each scrape. Returns an unwatch function. */
  watchConsumerLag(stream: string, durable: string, info: () => Promise<ConsumerLagInfo>): () => void;
  /** Samples a pool's connections at each scrape. */
  watchPool(pool: string, stats: PoolStats): () => void;
  /** Samples the count of events written but not yet published (an outbox). */
  watchOutbox(outbox: string, count: () => Promise<number>): () => void;
}

/** Resolves with `work`, or rejects after `ms`. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A fresh registry with every shared metric, labelled with the service name.
 * `processMetrics` adds prom-client's process and Node.js runtime metrics
 * (CPU, memory, event loop lag, GC): on in main.ts, off in tests.
 */
export function createMetrics(options: { service: string; processMetrics?: boolean }): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: options.service });
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const lagSources = new Map<string, { stream: string; durable: string; info: () => Promise<ConsumerLagInfo> }>();
  const poolSources = new Map<string, PoolStats>();
  const outboxSources = new Map<string, () => Promise<number>>();
  const watch = <V>(map: Map<string, V>, key: string, value: V) => {
    map.set(key, value);
    return () => {
      if (map.get(key) === value) map.delete(key);
    };
  };

  // Sampled gauges: registered with the registry, set only by their collect().
  new Gauge({
    name: "whereabouts_consumer_lag_messages",
    help: "JetStream consumer lag: num_pending + num_ack_pending of the durable, sampled at scrape (NaN: unknown)",
    labelNames: CONSUMER_LABELS,
    registers,
    async collect() {
      this.reset();
      await Promise.all(
        [...lagSources.values()].map(async ({ stream, durable, info }) => {
          try {
            const i = await within(info(), SAMPLE_TIMEOUT_MS);
            this.set({ stream, durable }, i.num_pending + i.num_ack_pending);
          } catch {
            this.set({ stream, durable }, Number.NaN);
          }
        }),
      );
    },
  });

  new Gauge({
    name: "whereabouts_db_pool_connections",
    help: "Database pool connections by state (in_use, idle)",
    labelNames: ["pool", "state"] as const,
    registers,
    collect() {
      this.reset();
      for (const [pool, s] of poolSources) {
        this.set({ pool, state: "in_use" }, s.totalCount - s.idleCount);
        this.set({ pool, state: "idle" }, s.idleCount);
      }
    },
  });
  new Gauge({
    name: "whereabouts_db_pool_waiting_requests",
    help: "Queries waiting for a database pool connection",
    labelNames: ["pool"] as const,
    registers,
    collect() {
      this.reset();
      for (const [pool, s] of poolSources) this.set({ pool }, s.waitingCount);
    },
  });
  new Gauge({
    name: "whereabouts_db_pool_max_connections",
    help: "Configured size of the database pool",
    labelNames: ["pool"] as const,
    registers,
    collect() {
      this.reset();
      for (const [pool, s] of poolSources) if (s.options?.max !== undefined) this.set({ pool }, s.options.max);
    },
  });

  new Gauge({
    name: "whereabouts_outbox_backlog_events",
    help: "Events committed to the outbox but not yet published to JetStream (NaN: unknown)",
    labelNames: ["outbox"] as const,
    registers,
    async collect() {
      this.reset();
      await Promise.all(
        [...outboxSources].map(async ([outbox, count]) => {
          try {
            this.set({ outbox }, await within(count(), SAMPLE_TIMEOUT_MS));
          } catch {
            this.set({ outbox }, Number.NaN);
          }
        }),
      );
    },
  });

  // Counters and histograms go into this registry only, never prom-client's global one (a registry per process or test).
  const counter = <L extends string>(config: Omit<CounterConfiguration<L>, "registers">) => new Counter<L>({ ...config, registers });
  const histogram = <L extends string>(config: Omit<HistogramConfiguration<L>, "registers">) => new Histogram<L>({ ...config, registers });

  return {
    registry,
    service: options.service,
    rpcRequests: counter({
      name: "whereabouts_rpc_requests_total",
      help: "RPC requests answered, per subject (<service>.<operation>) and reply status",
      labelNames: RPC_LABELS,
    }),
    rpcDuration: histogram({
      name: "whereabouts_rpc_request_duration_seconds",
      help: "Time from receiving an RPC request to sending its reply",
      labelNames: RPC_LABELS,
      buckets: LATENCY_BUCKETS,
    }),
    httpRequests: counter({
      name: "whereabouts_http_requests_total",
      help: "HTTP requests answered by the gateway, per method, route pattern and status",
      labelNames: HTTP_LABELS,
    }),
    httpDuration: histogram({
      name: "whereabouts_http_request_duration_seconds",
      help: "HTTP request latency at the gateway, per method, route pattern and status",
      labelNames: HTTP_LABELS,
      buckets: LATENCY_BUCKETS,
    }),
    rateLimited: counter({
      name: "whereabouts_rate_limited_total",
      help: "Requests refused with 429 rate_limited, per API key id",
      labelNames: ["key_id"] as const,
    }),
    consumerProcessed: counter({
      name: "whereabouts_consumer_messages_processed_total",
      help: "JetStream messages handled by a batch that succeeded (acked, or terminated as poison)",
      labelNames: CONSUMER_LABELS,
    }),
    consumerFailed: counter({
      name: "whereabouts_consumer_messages_failed_total",
      help: "JetStream messages of batches that failed and were nak'ed for redelivery",
      labelNames: CONSUMER_LABELS,
    }),
    consumerDeadLettered: counter({
      name: "whereabouts_consumer_messages_dead_lettered_total",
      help: "JetStream messages a consumer refused, put on DEAD_LETTERS with the reason and terminated",
      labelNames: [...CONSUMER_LABELS, "reason"] as const,
    }),
    consumerBatchDuration: histogram({
      name: "whereabouts_consumer_batch_duration_seconds",
      help: "Time to handle one batch of a JetStream consumer, per outcome (ok, failed)",
      labelNames: [...CONSUMER_LABELS, "outcome"] as const,
      buckets: BATCH_BUCKETS,
    }),
    deadLettered: counter({
      name: "whereabouts_dead_lettered_total",
      help: "Messages moved to a dead-letter stream, per reason",
      labelNames: ["reason"] as const,
    }),
    webhookAttempts: counter({
      name: "whereabouts_webhook_attempts_total",
      help: "Webhook delivery attempts, per outcome: delivered (2xx), retry (scheduled again), failed (retries exhausted)",
      labelNames: ["outcome"] as const,
    }),
    webhookTakeovers: counter({
      name: "whereabouts_webhook_takeovers_total",
      help: "Webhook deliveries taken over after the replica sending them stopped; the receiver may see them twice",
    }),
    webhookLag: histogram({
      name: "whereabouts_webhook_delivery_lag_seconds",
      help: "From an event's recording to its delivery (2xx)",
      buckets: LATENCY_BUCKETS,
    }),
    historyRowsRemoved: counter({
      name: "whereabouts_history_rows_removed_total",
      help: "History rows removed by organizations' history_retention_days",
    }),
    alertsFired: counter({
      name: "whereabouts_alerts_fired_total",
      help: "Zone and asset alerts recorded as partner events, per type",
      labelNames: ["type"] as const,
    }),
    watchConsumerLag: (stream, durable, info) => watch(lagSources, `${stream}/${durable}`, { stream, durable, info }),
    watchPool: (pool, stats) => watch(poolSources, pool, stats),
    watchOutbox: (outbox, count) => watch(outboxSources, outbox, count),
  };
}

/**
 * The current value of one series (sampled gauges are sampled first), for
 * tests and in-process summaries; undefined when the series does not exist.
 * Histograms: pass `name_count`, `name_sum` or `name_bucket` (with `le`).
 */
export async function readMetric(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const base = name.replace(/_(count|sum|bucket)$/, "");
  const metric = metrics.registry.getSingleMetric(name) ?? metrics.registry.getSingleMetric(base);
  if (!metric) return undefined;
  const { name: metricName, values } = await metric.get();
  const found = (values as Array<{ value: number; labels: Record<string, unknown>; metricName?: string }>).find(
    (v) =>
      (v.metricName ?? metricName) === name && Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  );
  return found?.value;
}
