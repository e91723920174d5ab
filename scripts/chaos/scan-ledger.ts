/**
 * What `npm run chaos` expects the stack to show, kept as it publishes: the
 * reads it got an ack for (each one history row), the newest scan of every
 * asset (its position and its report row), and the poison messages it sent
 * by the reason they must be dead-lettered with. Entered on the ack, not on
 * the send: only a stored event has effects, and acks may come out of order,
 * so the newest scan is the one with the latest observed_at, whatever came
 * last. Pure bookkeeping; the comparison with what the stack shows is here
 * too, so tests/chaos-ledger.test.ts covers both.
 */
import type { DlqReason } from "@whereabouts/shared";

export interface NewestScan {
  locationId: number;
  /** Absent for an asset whose placement scan the ledger did not see: only its location is known. */
  observedAt?: string;
}

export interface LedgerScan {
  observedAt: string;
  location: { id: number };
  assets: ReadonlyArray<{ id: number }>;
}

export class ScanLedger {
  scans = 0;
  reads = 0;
  private readonly newest = new Map<number, NewestScan>();
  private readonly poison = new Map<DlqReason, number>();

  /** Where an asset already is before the run (its placement), time unknown. */
  place(assetId: number, locationId: number): void {
    this.newest.set(assetId, { locationId });
  }

  /** A scan JetStream acknowledged. */
  stored(scan: LedgerScan): void {
    this.scans++;
    this.reads += scan.assets.length;
    for (const asset of scan.assets) {
      const known = this.newest.get(asset.id);
      // ISO-8601 UTC strings of one format order as their instants.
      if (known?.observedAt !== undefined && known.observedAt > scan.observedAt) continue;
      this.newest.set(asset.id, { locationId: scan.location.id, observedAt: scan.observedAt });
    }
  }

  poisoned(reason: DlqReason): void {
    this.poison.set(reason, (this.poison.get(reason) ?? 0) + 1);
  }

  newestScans(): ReadonlyMap<number, NewestScan> {
    return this.newest;
  }

  poisonByReason(): Record<string, number> {
    return Object.fromEntries([...this.poison].sort(([a], [b]) => a.localeCompare(b)));
  }
}

/** What the stack shows for an asset: its location, and (on the report) when it was last seen. */
export interface ShownPosition {
  locationId: number | null;
  lastSeen?: string;
}

export interface PositionMismatch {
  assetId: number;
  expected: NewestScan;
  shown: ShownPosition | null;
}

export interface PositionComparison {
  checked: number;
  matching: number;
  mismatches: PositionMismatch[];
}

/**
 * Every asset of the ledger against what the stack shows. `compareTimes`
 * also requires the shown last-seen instant to equal the newest scan's
 * (the report has it; an asset's position does not).
 */
export function comparePositions(
  expected: ReadonlyMap<number, NewestScan>,
  shown: ReadonlyMap<number, ShownPosition>,
  compareTimes: boolean,
): PositionComparison {
  const mismatches: PositionMismatch[] = [];
  for (const [assetId, want] of expected) {
    const got = shown.get(assetId) ?? null;
    const sameLocation = got?.locationId === want.locationId;
    const sameTime =
      !compareTimes || want.observedAt === undefined || (got?.lastSeen !== undefined && Date.parse(got.lastSeen) === Date.parse(want.observedAt));
    if (!sameLocation || !sameTime) mismatches.push({ assetId, expected: want, shown: got });
  }
  return { checked: expected.size, matching: expected.size - mismatches.length, mismatches };
}

/** Reasons whose dead-letter count differs from what was sent, with both counts. */
export function compareDeadLetters(sent: Record<string, number>, found: Record<string, number>): Array<{ reason: string; sent: number; found: number }> {
  const reasons = [...new Set([...Object.keys(sent), ...Object.keys(found)])].sort();
  return reasons.map((reason) => ({ reason, sent: sent[reason] ?? 0, found: found[reason] ?? 0 })).filter((r) => r.sent !== r.found);
}
