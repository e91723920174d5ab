/**
 * Read-your-writes across services (ARCHITECTURE.md rule 4), without a
 * JetStream API request per read and never behind scan processing.
 *
 * - Catalog, after publishing a write's events to the CATALOG stream and
 *   before answering, announces the organization's newest sequence on the
 *   core subject `catalog.written.<org_id>`.
 * - Every gateway keeps the newest announced sequence per organization (from
 *   boot on it starts from the stream's last sequence, so writes made before
 *   it started count too) and puts it in each RPC envelope as `catalog_seq`.
 *   The gateway that forwarded a write sees its announcement before the
 *   write's reply: both leave catalog on one connection, in that order.
 * - A projection (reporting, tracking's catalog replica) answers a read only
 *   once its durable's ack floor has reached `catalog_seq`: the ack floor it
 *   last saw is kept, so a read that needs nothing newer costs nothing, and
 *   concurrent reads that do share one consumer-info call at a time.
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { serviceUnavailable } from "./errors.ts";
import { catalogWrittenSubject, CATALOG_WRITTEN_ALL, STREAMS } from "./subjects.ts";
import { utf8Bytes } from "./nats.ts";

const decoder = new TextDecoder();

export function announceCatalogWrite(nc: NatsConnection, orgId: number, seq: number): void {
  nc.publish(catalogWrittenSubject(orgId), utf8Bytes(String(seq)));
}

export interface CatalogWatermarks {
  /** The sequence a read of this organization must see applied. */
  seqFor(orgId: number | null): number;
  /**
   * Resolves once every announcement the broker sent this gateway before the
   * call has been read. A write's announcement leaves catalog before its reply
   * does, but it reaches this gateway on a connection of its own: without this
   * a read through another gateway (or another socket of this process) can
   * overtake it. One PING/PONG round trip (no JetStream request), shared by
   * the reads that arrive together.
   */
  settled(): Promise<void>;
  stop(): void;
}

/**
 * A barrier over a connection: resolves after a flush that started after the
 * call. Calls that arrive while a flush is under way share the next one (the
 * one under way may have been sent before what they must see).
 */
export function flushBarrier(flush: () => Promise<void>): () => Promise<void> {
  let current: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = (): Promise<void> => {
    current = flush().finally(() => (current = undefined));
    return current;
  };
  return () => {
    if (!current) return start();
    next ??= current.then(
      () => {
        next = undefined;
        return start();
      },
      () => {
        next = undefined;
        return start();
      },
    );
    return next;
  };
}

export async function watchCatalogWrites(nc: NatsConnection, jsm: JetStreamManager): Promise<CatalogWatermarks> {
  const byOrg = new Map<number, number>();
  const sub = nc.subscribe(CATALOG_WRITTEN_ALL, {
    callback: (err, msg) => {
      if (err) return;
      const orgId = Number(msg.subject.slice(msg.subject.lastIndexOf(".") + 1));
      const seq = Number(decoder.decode(msg.data));
      if (!Number.isSafeInteger(orgId) || !Number.isSafeInteger(seq)) return;
      if (seq > (byOrg.get(orgId) ?? 0)) byOrg.set(orgId, seq);
    },
  });
  // Subscribed first, then the stream's position: no write falls between the two.
  await nc.flush();
  // No stream yet (a gateway booting before any service): no write to wait for.
  const floor = await jsm.streams.info(STREAMS.CATALOG.name).then(
    (info) => info.state.last_seq,
    (err: unknown) => {
      if (err instanceof Error && /not found/i.test(err.message)) return 0;
      throw err;
    },
  );
  return {
    seqFor: (orgId) => Math.max(floor, orgId === null ? 0 : (byOrg.get(orgId) ?? 0)),
    settled: flushBarrier(() => nc.flush()),
    stop: () => sub.unsubscribe(),
  };
}

export interface ConsistencyGate {
  /** Resolves once the durable has applied every CATALOG sequence up to `seq`; 503 after the timeout. */
  reach(seq: number | undefined): Promise<void>;
}

export function createConsistencyGate(options: {
  jsm: JetStreamManager;
  stream: string;
  durable: string;
  timeoutMs: number;
}): ConsistencyGate {
  let applied = 0;
  let probing: Promise<void> | undefined;
  const probe = () =>
    (probing ??= options.jsm.consumers
      .info(options.stream, options.durable)
      .then(
        (info) => {
          applied = Math.max(applied, info.ack_floor.stream_seq);
        },
        () => undefined,
      )
      .finally(() => (probing = undefined)));

  return {
    async reach(seq) {
      if (seq === undefined || seq <= applied) return;
      const deadline = Date.now() + options.timeoutMs;
      let delay = 1;
      for (;;) {
        await probe();
        if (seq <= applied) return;
        if (Date.now() >= deadline) throw serviceUnavailable("The read model is catching up; retry shortly", 1);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 25);
      }
    },
  };
}
