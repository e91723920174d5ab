/**
 * Scan ingestion, one batch at a time:
 *   1. parse every message (subject, JSON, schema) — refusals are dead-lettered;
 *   2. catch the catalog replica up to the CATALOG stream's current position
 *      ("catalog writes come first");
 *   3. resolve organizations, locations and tags against the replica (tags
 *      from memory while the replica has not changed them: tag-resolver.ts);
 *   4. in one transaction: claim the idempotency keys, then write history rows
 *      and move positions (only the scans whose key was new);
 *   5. after commit: dead letters and position events, awaited;
 *   6. then ack (term the dead-lettered).
 * Steps 5-6 of a batch overlap steps 1-4 of the next (one batch at most).
 * A crash anywhere before 6 redelivers the batch; step 4 then changes nothing,
 * and the positions of the assets a repeated scan (its key already claimed)
 * resolves to are announced again (as `moved`; consumers keep the newest), so
 * an event lost between commit and publish is still sent. No outbox: no
 * second write per asset.
 */
import { setImmediate } from "node:timers/promises";
import type { JetStreamClient } from "@nats-io/jetstream";
import { phaseTimer, type JsMsg, type Logger, type ScanTag } from "@whereabouts/shared";
import { DataPhaseError, runIsolated } from "../db/batch-isolation.ts";
import { inTransaction, type TrackingClient } from "../db/tracking-db.ts";
import {
  knownOrgs,
  resolveLocations,
  type KnownOrgs,
  type LocationRef,
  type TagRef,
} from "../replica/replica-store.ts";
import { createTagResolver } from "../replica/tag-resolver.ts";
import { deadLetter } from "./dead-letter.ts";
import { verbOf, type PositionPublisher, type PositionVerb } from "./position-publisher.ts";
import { createScanMetrics, type ScanCounters } from "./scan-metrics.ts";
import { parseScanMessage, type ParsedScan, type RefusedScan, type ScanMessage } from "./scan-parser.ts";
import { claimKeys, currentPositions, recordScans, type PositionState, type ScanRow } from "./scan-store.ts";
import { createSmoother } from "./smoothing.ts";
import { eventIdOfKey, isHandheldSubject, recordOutcomes, type ScanOutcome } from "./scan-outcomes.ts";

/**
 * A scan that resolved, as the rest of its batch needs it: not the parsed
 * payload, whose tags (two objects and a string per read) would otherwise stay
 * alive through the commit and the announcement after it.
 */
interface GoodScan {
  msg: JsMsg;
  orgId: number;
  /** Idempotency key (scan-parser.ts). */
  key: string;
  observedAt: string;
  observedUs: number;
  locationId: number;
  assetIds: number[];
  /** Handheld submissions only (scan-outcomes.ts): the tags that resolved to no asset. */
  unresolved?: ScanTag[];
}

type Refused = { msg: JsMsg; refusal: Omit<RefusedScan, "kind"> };

/** Scan messages parsed between yields to the event loop. */
const PARSE_SLICE = 500;

const toScanMessage = (msg: JsMsg): ScanMessage => ({
  subject: msg.subject,
  data: msg.data,
  seq: msg.seq,
  // Read only for a scan without an event_id: parsing it from the reply subject for every scan was 1% of tracking's CPU.
  get timestampNanos() {
    return msg.timestampNanos;
  },
});

function locationRefKey(orgId: number, ref: ParsedScan["location"]): string {
  if ("scan_point" in ref) return `${orgId}|p|${ref.scan_point.source}|${ref.scan_point.antenna ?? ""}`;
  if ("id" in ref) return `${orgId}|i|${ref.id}`;
  if ("external_key" in ref) return `${orgId}|k|${ref.external_key}`;
  return `${orgId}|t|${ref.tag_type}\u0000${ref.value}`;
}

export function createScanService(deps: {
  db: TrackingClient;
  /** Dead letters. */
  js: JetStreamClient;
  positions: PositionPublisher;
  /** Catches the catalog replica up to the CATALOG stream's position now. */
  catchUp: () => Promise<void>;
  logger: Logger;
  counters: ScanCounters;
}) {
  const { db, js, logger } = deps;
  const metrics = createScanMetrics();
  const smoother = createSmoother();
  const tags = createTagResolver();

  async function dataPhase<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw new DataPhaseError(err instanceof Error ? err.message : String(err), { cause: err });
    }
  }

  /** Step 1: each message parsed, refused (to dead-letter) or skipped, in stream order. */
  async function parseBatch(messages: JsMsg[]) {
    const ordered = [...messages].sort((a, b) => a.seq - b.seq);
    const skipped: JsMsg[] = [];
    const refused: Refused[] = [];
    const parsed: Array<{ msg: JsMsg; scan: ParsedScan }> = [];
    for (const [i, msg] of ordered.entries()) {
      // 2,000 scans took 45-90 ms to parse here: between slices of a full batch (DEFAULT_SCAN_BATCH_SIZE), the
      // requests waiting on this process (history reads) go first.
      if (i > 0 && i % PARSE_SLICE === 0) await setImmediate();
      const result = parseScanMessage(toScanMessage(msg));
      if (result.kind === "skip") skipped.push(msg);
      else if (result.kind === "refused") refused.push({ msg, refusal: result });
      else parsed.push({ msg, scan: result });
    }
    return { skipped, refused, parsed };
  }

  /**
   * Step 3: organizations, locations and tags resolved against the replica
   * (read after the catch-up: every catalog write, settings included,
   * published before the batch's scans is in it). Refusals join `refused`.
   */
  async function resolveBatch(parsed: Array<{ msg: JsMsg; scan: ParsedScan }>, refused: Refused[]) {
    const locationIndex = new Map<string, number>();
    const locationRefs: LocationRef[] = [];
    // Each distinct tag once, by organization, type and value (the scan's own strings as keys: no key is built per
    // read); each scan's tags as indexes into tagRefs.
    const tagIndex = new Map<number, Map<string, Map<string, number>>>();
    const tagSlots = new Map<ParsedScan, number[]>();
    const tagRefs: TagRef[] = [];
    for (const { scan } of parsed) {
      const lk = locationRefKey(scan.orgId, scan.location);
      if (!locationIndex.has(lk)) {
        locationIndex.set(lk, locationRefs.length);
        const ref = scan.location;
        locationRefs.push(
          "scan_point" in ref
            ? { orgId: scan.orgId, source: ref.scan_point.source, antenna: ref.scan_point.antenna }
            : "id" in ref
            ? { orgId: scan.orgId, id: ref.id }
            : "external_key" in ref
              ? { orgId: scan.orgId, externalKey: ref.external_key }
              : { orgId: scan.orgId, tagType: ref.tag_type, value: ref.value },
        );
      }
      let byType = tagIndex.get(scan.orgId);
      if (!byType) tagIndex.set(scan.orgId, (byType = new Map()));
      const slots: number[] = new Array(scan.tags.length);
      for (let j = 0; j < scan.tags.length; j++) {
        const tag = scan.tags[j]!;
        let byValue = byType.get(tag.tag_type);
        if (!byValue) byType.set(tag.tag_type, (byValue = new Map()));
        let slot = byValue.get(tag.value);
        if (slot === undefined) {
          byValue.set(tag.value, (slot = tagRefs.length));
          tagRefs.push({ orgId: scan.orgId, tagType: tag.tag_type, value: tag.value });
        }
        slots[j] = slot;
      }
      tagSlots.set(scan, slots);
    }
    // The organizations and the locations at once (an unknown organization's references find nothing), then the
    // tags, most from memory under the organizations' tokens.
    const [orgs, locations]: [KnownOrgs, Array<number | null>] = await Promise.all([
      knownOrgs(db, [...new Set(parsed.map((p) => p.scan.orgId))]),
      resolveLocations(db, locationRefs),
    ]);
    const assets = await tags.resolve(db, tagRefs, orgs);

    const good: GoodScan[] = [];
    let unresolvedTags = 0;
    for (const { msg, scan } of parsed) {
      if (!orgs.versions.has(scan.orgId)) {
        refused.push({ msg, refusal: { org: String(scan.orgId), reason: "unknown_org", detail: `organization ${scan.orgId} is not known` } });
        continue;
      }
      const locationId = locations[locationIndex.get(locationRefKey(scan.orgId, scan.location))!];
      if (locationId == null) {
        const point = "scan_point" in scan.location ? scan.location.scan_point : undefined;
        refused.push({
          msg,
          refusal: point
            ? {
                org: String(scan.orgId),
                reason: "unknown_scan_point",
                detail: `no live scan point maps source '${point.source}'${point.antenna === null ? "" : ` antenna ${point.antenna}`} to a live location`,
              }
            : { org: String(scan.orgId), reason: "unknown_location", detail: "location does not name a live location" },
        });
        continue;
      }
      const assetIds = new Set<number>();
      let unresolved = 0;
      const handheld = isHandheldSubject(msg.subject);
      const unresolvedOnes: ScanTag[] = [];
      const slots = tagSlots.get(scan)!;
      for (let j = 0; j < scan.tags.length; j++) {
        const tag = scan.tags[j]!;
        const assetId = assets[slots[j]!];
        if (assetId == null) {
          unresolved++;
          if (handheld) unresolvedOnes.push(tag);
        } else assetIds.add(assetId);
      }
      if (!assetIds.size) {
        refused.push({
          msg,
          refusal: { org: String(scan.orgId), reason: "no_resolved_tags", detail: `none of ${scan.tags.length} tags resolves to an asset` },
        });
        continue;
      }
      unresolvedTags += unresolved;
      const { orgId, key, observedAt, observedUs } = scan;
      good.push({ msg, orgId, key, observedAt, observedUs, locationId, assetIds: [...assetIds], ...(handheld ? { unresolved: unresolvedOnes } : {}) });
    }
    return { good, unresolvedTags, orgs };
  }

  /**
   * Steps 1-4 (through the commit). Returns step 5-6: announce, dead-letter,
   * settle, which the caller runs while the next batch is being committed.
   * The parsed payloads are garbage once resolved: only what the commit and
   * the announcement need outlives step 3 (settleStep's closure holds nothing
   * else while the next batch commits).
   */
  async function commitBatch(messages: JsMsg[]): Promise<() => Promise<void>> {
    const timer = phaseTimer();
    // The catch-up asks JetStream where CATALOG stands now; any moment after these scans arrived will do, so it is
    // asked while they are parsed. Awaited only when a scan needs it; never left unhandled.
    const caughtUp = deps.catchUp();
    caughtUp.catch(() => undefined);
    const { skipped, refused, parsed } = await parseBatch(messages);
    timer.lap("parse_ms");
    let good: GoodScan[] = [];
    let unresolvedTags = 0;
    let orgs: KnownOrgs = { versions: new Map(), windows: new Map(), nowMs: 0 };
    if (parsed.length) {
      await caughtUp;
      timer.lap("catch_up_ms");
      ({ good, unresolvedTags, orgs } = await dataPhase(() => resolveBatch(parsed, refused)));
      // The closure above keeps `parsed` in this scope through the commit: let the payloads go now.
      parsed.length = 0;
    }

    timer.lap("resolve_ms");
    // Idempotency inside the batch too: the first scan with a key wins.
    const seenKeys = new Set<string>();
    const unique = good.filter(({ orgId, key }) => {
      const k = `${orgId}|${key}`;
      if (seenKeys.has(k)) return false;
      seenKeys.add(k);
      return true;
    });

    let fresh = 0;
    let reads = 0;
    let changes: PositionState[] = [];
    // Scans whose key an earlier delivery already claimed.
    let repeated: GoodScan[] = [];
    if (unique.length) {
      // `locked`: smoothing reads every position it decides on locked (see smoothing.ts).
      const record = (locked: boolean) =>
        inTransaction(db, async (tx) => {
          const claimed = await claimKeys(tx, unique);
          const rows: ScanRow[] = [];
          const repeated: GoodScan[] = [];
          let fresh = 0;
          unique.forEach((good, ord) => {
            const { orgId, key, observedAt, observedUs, locationId, assetIds } = good;
            if (!claimed.has(`${orgId}|${key}`)) return void repeated.push(good);
            fresh++;
            for (const assetId of assetIds) rows.push({ orgId, assetId, observedAt, observedUs, locationId, ord, keep: true });
          });
          await smoother.apply(tx, rows, { locked, windows: orgs.windows });
          const recorded = await recordScans(tx, rows);
          smoother.check(recorded);
          return { fresh, reads: rows.length, recorded, repeated };
        });
      const outcome = await dataPhase(() =>
        smoother.record(record, (err) =>
          logger.info({ detail: err.message }, "another writer changed positions smoothing had remembered; deciding on locked rows for a while"),
        ),
      );
      ({ fresh, reads, repeated } = outcome);
      changes = outcome.recorded.changes;
    }

    timer.lap("commit_ms");
    // After commit: announce (again, for redelivered scans) and dead-letter.
    // A scan seen before is announced again, whatever JetStream's delivery
    // count says: a broker killed before it synced a consumer's state hands
    // out again, as first deliveries, scans whose announcement it never got.
    // Its assets' positions go out as `moved`, the verb every consumer applies:
    // the earlier announcement of their last move may never have been stored,
    // so a `seen` (even one this batch's own fresh scans produce) would leave
    // catalog on the location before it.
    const again = new Map<string, { orgId: number; assetId: number }>();
    for (const { orgId, assetIds } of repeated) {
      for (const assetId of assetIds) again.set(`${orgId}|${assetId}`, { orgId, assetId });
    }
    const announce: Array<{ state: PositionState; verb: PositionVerb }> = changes.map((state) => {
      const k = `${state.orgId}|${state.assetId}`;
      const redelivered = again.delete(k);
      return { state, verb: redelivered ? "moved" : verbOf(state) };
    });
    if (again.size) {
      const states = await dataPhase(() => currentPositions(db, [...again.values()]));
      for (const state of states) announce.push({ state, verb: "moved" });
    }
    refused.sort((a, b) => a.msg.seq - b.msg.seq);
    return settleStep({
      timer,
      size: messages.length,
      outcomes: handheldOutcomes(good, refused),
      announce,
      acked: [...skipped, ...good.map((g) => g.msg)],
      refused,
      counts: { fresh, duplicate: good.length - fresh, reads, unresolvedTags },
    });
  }

  /**
   * Steps 5-6 of a committed batch, as a closure over only what they need
   * (made apart from commitBatch, whose scope holds the batch's working data).
   */
  function settleStep(batch: {
    timer: ReturnType<typeof phaseTimer>;
    size: number;
    outcomes: ScanOutcome[];
    announce: Array<{ state: PositionState; verb: PositionVerb }>;
    /** Processed or skipped: acked. */
    acked: JsMsg[];
    refused: Refused[];
    counts: { fresh: number; duplicate: number; reads: number; unresolvedTags: number };
  }): () => Promise<void> {
    return async () => {
      const { timer, outcomes, announce, refused, counts } = batch;
      timer.lap("queued_ms");
      // Before the acks: a processed submission always has its outcome.
      if (outcomes.length) await recordOutcomes(db, outcomes);
      await Promise.all([
        deps.positions.publish(announce),
        ...refused.map(({ msg, refusal }) => deadLetter(js, msg, refusal)),
      ]);
      timer.lap("publish_ms");
      for (const msg of batch.acked) msg.ack();
      for (const { msg, refusal } of refused) {
        logger.warn({ subject: msg.subject, stream_seq: msg.seq, reason: refusal.reason, detail: refusal.detail }, "scan dead-lettered");
        metrics.deadLettered[refusal.reason]++;
        deps.counters.deadLettered(refusal.reason);
      }
      metrics.batches++;
      metrics.scansProcessed += counts.fresh;
      metrics.scansDuplicate += counts.duplicate;
      metrics.readsRecorded += counts.reads;
      metrics.tagsUnresolved += counts.unresolvedTags;
      metrics.positionEventsPublished += announce.length;
      deps.counters.record({
        processed: counts.fresh,
        duplicate: counts.duplicate,
        reads: counts.reads,
        unresolved: counts.unresolvedTags,
        events: announce.length,
      });
      if (counts.unresolvedTags) logger.info({ tags_unresolved: counts.unresolvedTags }, "unresolved tags skipped");
      logger.debug(
        {
          size: batch.size,
          scans: counts.fresh,
          duplicates: counts.duplicate,
          reads: counts.reads,
          dead_lettered: refused.length,
          events: announce.length,
          ...timer.timings,
          total_ms: timer.totalMs(),
        },
        "scan batch committed",
      );
    };
  }

  /** What became of the handheld submissions of a batch (fixed readers' scans have no outcome rows). */
  function handheldOutcomes(good: GoodScan[], refused: Refused[]): ScanOutcome[] {
    const out: ScanOutcome[] = [];
    for (const { orgId, key, locationId, assetIds, unresolved } of good) {
      const eventId = eventIdOfKey(key);
      if (!unresolved || eventId === undefined) continue;
      out.push({ orgId, eventId, status: "processed", locationId, assetIds, unresolvedTags: unresolved, reason: null });
    }
    for (const { msg, refusal } of refused) {
      if (!isHandheldSubject(msg.subject)) continue;
      const parsed = parseScanMessage(toScanMessage(msg));
      const eventId = parsed.kind === "scan" ? eventIdOfKey(parsed.key) : undefined;
      if (parsed.kind !== "scan" || eventId === undefined) continue;
      out.push({
        orgId: parsed.orgId,
        eventId,
        status: "dead_lettered",
        locationId: null,
        assetIds: [],
        unresolvedTags: refusal.reason === "no_resolved_tags" ? parsed.tags : [],
        reason: refusal.reason,
      });
    }
    return out;
  }

  /**
   * The announce/settle step of the previous batch: the next batch commits
   * while it runs (Postgres and NATS work in parallel), and the batch after
   * waits for it, so at most one batch is between commit and ack.
   */
  let settling: Promise<void> = Promise.resolve();

  /**
   * The consumer's batch handler: commits (isolating poison, dead-lettered as
   * processing_failed), then leaves the announce/settle step running while it
   * returns for the next batch. A failed announce naks the batch: redelivered,
   * it commits nothing new and is announced again.
   */
  async function handleBatch(messages: JsMsg[]): Promise<void> {
    const settles: Array<() => Promise<void>> = [];
    await runIsolated({
      messages,
      process: async (batch) => {
        settles.push(await commitBatch(batch));
      },
      db,
      logger,
      reject: async (msg, err) => {
        const parsed = parseScanMessage(toScanMessage(msg));
        const org = parsed.kind === "scan" ? String(parsed.orgId) : "unknown";
        const detail = err instanceof Error ? err.message : String(err);
        logger.error({ err, subject: msg.subject, stream_seq: msg.seq }, "scan could not be processed; dead-lettered");
        await deadLetter(js, msg, { org, reason: "processing_failed", detail });
        metrics.deadLettered.processing_failed++;
        deps.counters.deadLettered("processing_failed");
      },
    });
    const previous = settling;
    settling = (async () => {
      await previous;
      try {
        for (const settle of settles) await settle();
      } catch (err) {
        logger.error({ err, size: messages.length }, "announcing a committed batch failed; it will be redelivered");
        for (const msg of messages) msg.nak(1000);
      }
    })();
    await previous;
  }

  /** Waits for the batch still being announced (shutdown). */
  const drain = () => settling;

  return { handleBatch, drain, metrics };
}
export type ScanService = ReturnType<typeof createScanService>;
