/**
 * The scan traffic the ingest cases publish, as DECISIONS.md "Scan ingestion"
 * defines it, over a model of where every seeded asset is: a steady read (an
 * asset seen again where it already is) and a churn read (an asset seen at a
 * different location) are told apart by that model. Observation times come
 * from one clock that only moves forward, 1 ms per event, starting in the
 * past, so every event is newer than the last and no two share a time.
 */
import { encodeJson, scanSubject } from "@whereabouts/shared";
import type { CatalogSeed, SeededAsset, SeededLocation } from "./catalog-seed.ts";

export const TAGS_PER_EVENT = 10;
export const SCAN_SOURCE_NAME = "bench-reader";

export interface ScanEventPayload {
  event_id: string;
  observed_at: string;
  location: { external_key: string };
  tags: Array<{ tag_type: "rfid"; value: string }>;
}

/** One event ready to publish, with what the benchmark needs to check its effects. */
export interface BuiltScan {
  /** The payload's event_id, also a fit Nats-Msg-Id for retries. */
  eventId: string;
  subject: string;
  data: Uint8Array;
  observedAt: string;
  location: SeededLocation;
  assets: SeededAsset[];
}

export class ScanClock {
  private last: number;
  constructor(startMs: number) {
    this.last = startMs;
  }
  next(): string {
    this.last += 1;
    return new Date(this.last).toISOString();
  }
}

const randomInt = (n: number) => Math.floor(Math.random() * n);

/** Where each asset of the ingest pool is, by pool index and location index. */
export class FleetModel {
  private readonly locationOf: Int32Array;
  private readonly slot: Int32Array;
  private readonly members: number[][];

  constructor(
    readonly assets: readonly SeededAsset[],
    readonly locations: readonly SeededLocation[],
  ) {
    this.locationOf = new Int32Array(assets.length).fill(-1);
    this.slot = new Int32Array(assets.length).fill(-1);
    this.members = locations.map(() => []);
  }

  /** Reads that moved an asset (its location changed) since the model began: each writes a history row, smoothed or not. */
  moves = 0;

  locationIndexOf(asset: number): number {
    return this.locationOf[asset]!;
  }

  move(asset: number, location: number): void {
    const from = this.locationOf[asset]!;
    if (from === location) return;
    this.moves++;
    if (from >= 0) {
      const list = this.members[from]!;
      const at = this.slot[asset]!;
      const last = list.pop()!;
      if (last !== asset) {
        list[at] = last;
        this.slot[last] = at;
      }
    }
    this.locationOf[asset] = location;
    this.slot[asset] = this.members[location]!.length;
    this.members[location]!.push(asset);
  }

  /** Up to `count` distinct assets currently at `location`. */
  private pickAt(location: number, count: number): number[] {
    const list = [...this.members[location]!];
    const picked: number[] = [];
    while (picked.length < count && list.length) {
      const i = randomInt(list.length);
      picked.push(list[i]!);
      list[i] = list[list.length - 1]!;
      list.pop();
    }
    return picked;
  }

  /** A distinct asset not at `location` and not in `taken` (nor in `exclude`). */
  private pickElsewhere(location: number, taken: Set<number>, exclude?: ReadonlySet<number>): number {
    for (;;) {
      const a = randomInt(this.assets.length);
      if (this.locationOf[a] !== location && !taken.has(a) && !exclude?.has(a)) return a;
    }
  }

  /**
   * 9 of 10 reads repeat assets already at the location (a location with
   * enough of them is chosen), one moves an asset there.
   */
  steadyReads(): { location: number; assets: number[] } {
    let location = randomInt(this.locations.length);
    for (let tries = 0; tries < 50 && this.members[location]!.length < TAGS_PER_EVENT - 1; tries++) {
      location = randomInt(this.locations.length);
    }
    const repeats = this.pickAt(location, TAGS_PER_EVENT - 1);
    const taken = new Set(repeats);
    while (taken.size < TAGS_PER_EVENT) taken.add(this.pickElsewhere(location, taken));
    for (const a of taken) this.move(a, location);
    return { location, assets: [...taken] };
  }

  /** `count` assets already at a location with that many (or as many as it has): no move. */
  repeatReads(count: number): { location: number; assets: number[] } {
    let location = randomInt(this.locations.length);
    for (let tries = 0; tries < 50 && this.members[location]!.length < count; tries++) location = randomInt(this.locations.length);
    return { location, assets: this.pickAt(location, count) };
  }

  /** Every read moves an asset to a location it is not at; none of `exclude` (the caller's already moved assets, say). */
  churnReads(exclude?: ReadonlySet<number>): { location: number; assets: number[] } {
    // Far from exhausting the fleet (the webhooks case moves 1,500 of 20,000 assets), or the pick would never end.
    if (exclude && exclude.size > this.assets.length / 2) throw new Error(`churnReads: ${exclude.size} of ${this.assets.length} assets excluded`);
    const location = randomInt(this.locations.length);
    const taken = new Set<number>();
    while (taken.size < TAGS_PER_EVENT) taken.add(this.pickElsewhere(location, taken, exclude));
    for (const a of taken) this.move(a, location);
    return { location, assets: [...taken] };
  }
}

export class ScanFactory {
  private sequence = 0;
  constructor(
    private readonly orgId: number,
    private readonly runId: string,
    private readonly clock: ScanClock,
  ) {}

  build(location: SeededLocation, assets: readonly SeededAsset[]): BuiltScan {
    const observedAt = this.clock.next();
    const eventId = `bench-${this.runId}-${++this.sequence}`;
    const payload: ScanEventPayload = {
      event_id: eventId,
      observed_at: observedAt,
      location: { external_key: location.externalKey },
      tags: assets.map((a) => ({ tag_type: "rfid", value: a.tagValue })),
    };
    return { eventId, subject: scanSubject(this.orgId, SCAN_SOURCE_NAME), data: encodeJson(payload), observedAt, location, assets: [...assets] };
  }
}

/** The assets the ingest cases move about, and the few kept aside for probes, history and markers. */
export interface AssetRoles {
  pool: SeededAsset[];
  probes: SeededAsset[];
  history: SeededAsset;
  marker: SeededAsset;
}

export function assignRoles(seed: CatalogSeed, probes: number): AssetRoles {
  const assets = seed.assets;
  return {
    history: assets[0]!,
    marker: assets[1]!,
    probes: assets.slice(2, 2 + probes),
    pool: assets.slice(2 + probes),
  };
}

/**
 * The end-of-run marker: one read of an asset no other traffic touches,
 * moving it to the location it is not at (it flips between two), at a time
 * later than every scan before it. Its position, report row and history can
 * only show it once this very event went through every stage; stages
 * process in order, so everything published before it went through too.
 */
export class MarkerScans {
  private at = -1;
  constructor(
    private readonly asset: SeededAsset,
    private readonly locations: readonly [SeededLocation, SeededLocation],
    private readonly factory: ScanFactory,
  ) {}

  next(): BuiltScan {
    this.at = this.at === 0 ? 1 : 0;
    return this.factory.build(this.locations[this.at]!, [this.asset]);
  }
}

/** Pool assets spread evenly over the locations, one event per location (not timed). */
export function placementScans(fleet: FleetModel, factory: ScanFactory): BuiltScan[] {
  const byLocation = new Map<number, number[]>();
  fleet.assets.forEach((_, a) => {
    const l = a % fleet.locations.length;
    fleet.move(a, l);
    byLocation.set(l, [...(byLocation.get(l) ?? []), a]);
  });
  return [...byLocation].map(([l, members]) =>
    factory.build(
      fleet.locations[l]!,
      members.map((a) => fleet.assets[a]!),
    ),
  );
}
