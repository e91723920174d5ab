/**
 * The chaos run: scans published steadily (every one retried until stored,
 * with poison messages among them) while the fault schedule kills and
 * restarts tracking, reporting, catalog and the broker; then, once the
 * stack has caught up, the invariants:
 *   - history rows = the resolved reads acknowledged (nothing lost), and no
 *     (asset, instant) recorded twice (nothing duplicated);
 *   - every asset's position (catalog) and report row (reporting) = its
 *     newest scan;
 *   - every poison message in SCANS_DLQ with its reason, none more;
 *   - re-published events (same event_id, exact copies and altered ones)
 *     change nothing: same history, positions and report after they went
 *     through (a marker scan published after them shows they did).
 * Waits poll with a deadline; a deadline that passes is a failed check with
 * the figures it saw, never a hang.
 *
 * The assets take turns: each fault, as it strikes, moves the traffic to the
 * next cohort of assets, and the one before is never scanned again. So the
 * scans in flight when a fault struck stay their assets' newest, and an
 * effect lost there shows in the final positions and report instead of
 * being covered by a later scan.
 */
import { encodeJson, scanSubject, type DlqReason } from "@whereabouts/shared";
import type pg from "pg";
import type { BenchContext, IngestAccess } from "../bench/bench-context.ts";
import { waitForIngest } from "../bench/ingest-completion.ts";
import type { RunningStack } from "../bench/private-stack.ts";
import { paced, publishUntilStored } from "../bench/scan-publisher.ts";
import { TAGS_PER_EVENT, type BuiltScan } from "../bench/scan-workload.ts";
import { connectSql } from "../bench/sql-client.ts";
import { readIngestCounters } from "../bench/tracking-counters.ts";
import { FAULTS, runFaultSchedule, type FaultRecord } from "./fault-schedule.ts";
import { compareDeadLetters, comparePositions, ScanLedger, type PositionComparison } from "./scan-ledger.ts";
import { deadLettersByReason, historyState, shownPositions, shownReport, type HistoryState } from "./stack-state.ts";

export interface ChaosProfile {
  readsPerSecond: number;
  rounds: number;
  /** Normal traffic before each fault, and after the last. */
  calmMs: number;
  processDownMs: number;
  brokerDownMs: number;
  /** One poison message per this many scans. */
  poisonEvery: number;
  /** Events re-published with their event_id after the run: exact copies, and copies with a newer time and another location. */
  exactDuplicates: number;
  alteredDuplicates: number;
  /** How long one event may go unacknowledged (through outages) before the run counts it failed. */
  publishDeadlineMs: number;
  /** How long the stack may take to catch up after the faults. */
  settleTimeoutMs: number;
}

export interface CheckResult {
  check: string;
  expected: string;
  actual: string;
  ok: boolean;
}

export interface ChaosResult {
  seconds: number;
  scans: number;
  reads: number;
  poison: Record<string, number>;
  publish: { retried: number; storedOnRetry: number; failed: number; maxAttempts: number };
  /** Groups of assets the traffic moved between, one per fault (and one before the first). */
  cohorts: number[];
  faults: FaultRecord[];
  /** Seconds from the last fault's recovery until every invariant held. */
  settleSeconds: number | null;
  lost: number;
  duplicated: number;
  checks: CheckResult[];
  mismatchSamples: unknown[];
}

const POISON_REASONS = ["invalid_json", "invalid_schema", "unknown_location", "no_resolved_tags"] as const satisfies readonly DlqReason[];

/** A payload tracking must dead-letter with `reason` (and nothing else). */
function poisonPayload(reason: (typeof POISON_REASONS)[number], n: number, ctx: BenchContext): Uint8Array {
  const eventId = `chaos-${ctx.runId}-poison-${n}`;
  const observed_at = new Date().toISOString();
  const someTag = [{ tag_type: "rfid", value: ctx.roles.pool[0]!.tagValue }];
  switch (reason) {
    case "invalid_json":
      return new TextEncoder().encode(`{"event_id":"${eventId}",`);
    case "invalid_schema":
      return encodeJson({ event_id: eventId, observed_at, tags: "not a list" });
    case "unknown_location":
      return encodeJson({ event_id: eventId, observed_at, location: { external_key: `CHAOS-NOWHERE-${n}` }, tags: someTag });
    case "no_resolved_tags":
      return encodeJson({
        event_id: eventId,
        observed_at,
        location: { external_key: ctx.seed.locations[0]!.externalKey },
        tags: [{ tag_type: "rfid", value: `CHAOS-NO-SUCH-TAG-${n}` }],
      });
  }
}

interface Observed {
  history: HistoryState;
  deadLetters: Record<string, number>;
  positions: PositionComparison;
  report: PositionComparison;
}

async function observe(ctx: BenchContext, sql: pg.Client, ingest: IngestAccess, ledger: ScanLedger): Promise<Observed> {
  const expected = ledger.newestScans();
  return {
    history: await historyState(sql, ctx.orgId),
    deadLetters: await deadLettersByReason(ingest.nc, ctx.orgId),
    positions: comparePositions(expected, await shownPositions(ctx.api), false),
    report: comparePositions(expected, await shownReport(ctx.api), true),
  };
}

function checksOf(o: Observed, want: { historyRows: number; poison: Record<string, number> }, label: string): CheckResult[] {
  const dlqDiff = compareDeadLetters(want.poison, o.deadLetters);
  const format = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([r, n]) => `${r} ${n}`)
      .join(", ") || "none";
  return [
    { check: `${label}history rows = resolved reads`, expected: String(want.historyRows), actual: String(o.history.rows), ok: o.history.rows === want.historyRows },
    { check: `${label}reads recorded twice`, expected: "0", actual: String(o.history.duplicated), ok: o.history.duplicated === 0 },
    {
      check: `${label}positions = newest scan`,
      expected: `${o.positions.checked} assets`,
      actual: `${o.positions.matching} match`,
      ok: o.positions.mismatches.length === 0,
    },
    {
      check: `${label}report = newest scan`,
      expected: `${o.report.checked} assets`,
      actual: `${o.report.matching} match`,
      ok: o.report.mismatches.length === 0,
    },
    { check: `${label}poison in DLQ, by reason`, expected: format(want.poison), actual: format(o.deadLetters), ok: dlqDiff.length === 0 },
  ];
}

const allHold = (checks: CheckResult[]) => checks.every((c) => c.ok);

/** Reads missing from history, reads there too often (extra rows or ties), and a few misplaced assets for the JSON. */
function lossesOf(o: Observed, expectedRows: number) {
  return {
    lost: Math.max(0, expectedRows - o.history.rows),
    duplicated: Math.max(0, o.history.rows - expectedRows) + o.history.duplicated,
    mismatchSamples: [...o.positions.mismatches.slice(0, 3), ...o.report.mismatches.slice(0, 3)],
  };
}

export async function runChaos(
  ctx: BenchContext,
  stack: RunningStack,
  profile: ChaosProfile,
  log: (m: string) => void,
): Promise<ChaosResult> {
  const ingest = ctx.ingest;
  if (!ingest || !ctx.databaseUrl) throw new Error("chaos needs the private stack's NATS and database");
  const sql = await connectSql(ctx.databaseUrl);
  try {
    return await runWithSql(ctx, stack, profile, log, ingest, sql);
  } finally {
    await sql.end().catch(() => undefined);
  }
}

async function runWithSql(
  ctx: BenchContext,
  stack: RunningStack,
  profile: ChaosProfile,
  log: (m: string) => void,
  ingest: IngestAccess,
  sql: pg.Client,
): Promise<ChaosResult> {
  // Placement (bench-setup) already wrote history: the run's rows come on top.
  const before = await historyState(sql, ctx.orgId);
  const ledger = new ScanLedger();
  ctx.fleet.assets.forEach((asset, i) => ledger.place(asset.id, ctx.fleet.locations[ctx.fleet.locationIndexOf(i)]!.id));

  const publish = { retried: 0, storedOnRetry: 0, failed: 0, maxAttempts: 0 };
  const failures: string[] = [];
  /** Recent stored scans, the pool the duplicates are drawn from. */
  const stored: BuiltScan[] = [];
  const send = async (item: { subject: string; data: Uint8Array; msgID: string }) => {
    try {
      const r = await publishUntilStored(ingest.js, item, { attemptTimeoutMs: 2000, deadlineMs: profile.publishDeadlineMs });
      if (r.attempts > 1) publish.retried++;
      if (r.duplicate) publish.storedOnRetry++;
      publish.maxAttempts = Math.max(publish.maxAttempts, r.attempts);
      return true;
    } catch (err) {
      publish.failed++;
      if (failures.length < 5) failures.push((err as Error).message);
      return false;
    }
  };

  const cohorts = assetCohorts(ctx.fleet.assets, profile.rounds * FAULTS.length + 1);
  let cohort = 0;
  const startedAt = Date.now();
  let publishing = true;
  let poisonSent = 0;
  const scansPerSecond = profile.readsPerSecond / TAGS_PER_EVENT;
  const publisher = paced(
    scansPerSecond,
    Number.POSITIVE_INFINITY,
    async (n) => {
      if (n % profile.poisonEvery === 0) {
        const reason = POISON_REASONS[poisonSent % POISON_REASONS.length]!;
        const seq = ++poisonSent;
        const data = poisonPayload(reason, seq, ctx);
        if (await send({ subject: scanSubject(ctx.orgId, "chaos-reader"), data, msgID: `chaos-${ctx.runId}-poison-${seq}` })) ledger.poisoned(reason);
        return;
      }
      const reads = cohortScan(cohorts[cohort % cohorts.length]!, ctx.seed.locations.length);
      const scan = ctx.scans.build(ctx.seed.locations[reads.location]!, reads.assets);
      if (await send({ subject: scan.subject, data: scan.data, msgID: scan.eventId })) {
        ledger.stored(scan);
        stored.push(scan);
        if (stored.length > 5000) stored.splice(0, stored.length - 5000);
      }
    },
    () => !publishing,
    // Sends pending through an outage stay bounded; the pace resumes after it.
    4000,
  );

  let faults: FaultRecord[] = [];
  try {
    faults = await runFaultSchedule(stack, { ...profile, startedAt, log, onStrike: (n) => void (cohort = n) });
    await new Promise((r) => setTimeout(r, profile.calmMs));
  } finally {
    publishing = false;
    await publisher;
  }
  const publishedFor = (Date.now() - startedAt) / 1000;
  log(
    `published ${ledger.scans} scans (${ledger.reads} reads) and ${poisonSent} poison messages in ${publishedFor.toFixed(0)} s; ${publish.retried} retried, ${publish.failed} failed`,
  );
  for (const f of failures) log(`publish failed: ${f}`);

  // 1. Catch-up: every invariant must hold within the deadline.
  const settleStarted = Date.now();
  const want = () => ({ historyRows: before.rows + ledger.reads, poison: ledger.poisonByReason() });
  let observed = await observe(ctx, sql, ingest, ledger);
  let checks = checksOf(observed, want(), "");
  while (!allHold(checks) && Date.now() - settleStarted < profile.settleTimeoutMs) {
    await new Promise((r) => setTimeout(r, 1000));
    observed = await observe(ctx, sql, ingest, ledger);
    checks = checksOf(observed, want(), "");
  }
  const settled = allHold(checks);
  const settleSeconds = settled ? (Date.now() - settleStarted) / 1000 : null;
  log(settled ? `every invariant held ${settleSeconds!.toFixed(1)} s after publishing stopped` : `invariants still failing after ${profile.settleTimeoutMs / 1000} s`);
  const losses = [lossesOf(observed, want().historyRows)];

  // 2. Duplicates: the same event_ids again, then a marker behind them.
  let duplicateChecks: CheckResult[];
  try {
    const replay = await replayDuplicates(ctx, ingest, sql, ledger, stored, profile, send, log);
    duplicateChecks = [...checksOf(replay.observed, want(), "after duplicates: "), replay.skippedCheck];
    losses.push(lossesOf(replay.observed, want().historyRows));
  } catch (err) {
    duplicateChecks = [{ check: "duplicates re-published and drained", expected: "done", actual: (err as Error).message, ok: false }];
  }

  return {
    seconds: Math.round((Date.now() - startedAt) / 1000),
    scans: ledger.scans,
    reads: ledger.reads,
    poison: ledger.poisonByReason(),
    publish,
    cohorts: cohorts.map((c) => c.length),
    faults,
    settleSeconds,
    lost: Math.max(...losses.map((l) => l.lost)),
    duplicated: Math.max(...losses.map((l) => l.duplicated)),
    checks: [...checks, ...duplicateChecks],
    mismatchSamples: losses.flatMap((l) => l.mismatchSamples),
  };
}

/**
 * The pool split into `count` cohorts (fewer when that would leave one too
 * small to fill a scan twice over).
 */
export function assetCohorts<T>(pool: readonly T[], count: number): T[][] {
  const n = Math.max(1, Math.min(count, Math.floor(pool.length / (2 * TAGS_PER_EVENT))));
  return Array.from({ length: n }, (_, c) => pool.filter((_, i) => i % n === c));
}

/**
 * TAGS_PER_EVENT distinct assets of the cohort, anywhere, read at a random
 * location: most reads move their asset, a few see it where it is. (The
 * benchmark's FleetModel gathers assets where many already are, which a
 * cohort of a few dozen would soon exhaust.)
 */
function cohortScan<T>(cohort: readonly T[], locationCount: number): { location: number; assets: T[] } {
  const picked = [...cohort];
  for (let i = 0; i < TAGS_PER_EVENT; i++) {
    const j = i + Math.floor(Math.random() * (picked.length - i));
    [picked[i], picked[j]] = [picked[j]!, picked[i]!];
  }
  return { location: Math.floor(Math.random() * locationCount), assets: picked.slice(0, TAGS_PER_EVENT) };
}

async function replayDuplicates(
  ctx: BenchContext,
  ingest: IngestAccess,
  sql: pg.Client,
  ledger: ScanLedger,
  stored: readonly BuiltScan[],
  profile: ChaosProfile,
  send: (item: { subject: string; data: Uint8Array; msgID: string }) => Promise<boolean>,
  log: (m: string) => void,
): Promise<{ observed: Observed; skippedCheck: CheckResult }> {
  const countersBefore = await readIngestCounters(ingest.nc, ctx.orgId);
  const exact = stored.slice(-profile.exactDuplicates);
  const altered = stored.slice(0, profile.alteredDuplicates);
  let sent = 0;
  // A new Nats-Msg-Id each, so JetStream stores them and tracking must see through them by event_id.
  for (const scan of exact) if (await send({ subject: scan.subject, data: scan.data, msgID: `${scan.eventId}-again` })) sent++;
  for (const scan of altered) {
    const other = ctx.seed.locations.find((l) => l.id !== scan.location.id)!;
    const payload = {
      event_id: scan.eventId,
      // Newer than every scan so far (their clock runs days behind) and somewhere else: applied, it would move the assets.
      observed_at: new Date().toISOString(),
      location: { external_key: other.externalKey },
      tags: scan.assets.map((a) => ({ tag_type: "rfid", value: a.tagValue })),
    };
    if (await send({ subject: scan.subject, data: encodeJson(payload), msgID: `${scan.eventId}-altered` })) sent++;
  }
  // Stages process in order: once the marker shows everywhere, the duplicates before it went through.
  const marker = ctx.markers.next();
  await send({ subject: marker.subject, data: marker.data, msgID: marker.eventId });
  ledger.stored(marker);
  await waitForIngest(ctx.watch, marker, { timeoutMs: profile.settleTimeoutMs });
  const countersAfter = await readIngestCounters(ingest.nc, ctx.orgId);
  const skipped = countersAfter.scansDuplicate - countersBefore.scansDuplicate;
  log(`re-published ${sent} events with their event_id (${exact.length} exact, ${altered.length} altered); tracking skipped ${skipped} as duplicates`);

  return {
    observed: await observe(ctx, sql, ingest, ledger),
    // At least: a redelivery whose ack was lost in the faults counts there too.
    skippedCheck: { check: "duplicates skipped by tracking", expected: `>= ${sent}`, actual: String(skipped), ok: skipped >= sent },
  };
}
