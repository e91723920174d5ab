/**
 * The benchmark's model of where its assets are (scripts/bench/scan-workload.ts):
 * churn reads move every asset they name, and a caller can keep assets out
 * (the webhooks case moves each asset once, so tracking's per-batch coalescing
 * of two moves never leaves an expected event undelivered).
 */
import { describe, expect, it } from "vitest";
import { FleetModel, TAGS_PER_EVENT } from "../scripts/bench/scan-workload.ts";

const fleet = (assets: number, locations: number) =>
  new FleetModel(
    Array.from({ length: assets }, (_, i) => ({ id: i + 1, tagValue: `T${i}` })),
    Array.from({ length: locations }, (_, i) => ({ id: i + 1, externalKey: `L${i}` })),
  );

describe("FleetModel.churnReads", () => {
  it("names distinct assets, each moved to the read's location", () => {
    const model = fleet(200, 5);
    for (let i = 0; i < 50; i++) {
      const reads = model.churnReads();
      expect(new Set(reads.assets).size).toBe(TAGS_PER_EVENT);
      for (const a of reads.assets) expect(model.locationIndexOf(a)).toBe(reads.location);
    }
    expect(model.moves).toBe(50 * TAGS_PER_EVENT);
  });

  it("never picks an excluded asset, so each asset moves once when the caller excludes what it moved", () => {
    const model = fleet(100, 3);
    const moved = new Set<number>();
    for (let i = 0; i < 5; i++) {
      const reads = model.churnReads(moved);
      for (const a of reads.assets) {
        expect(moved.has(a)).toBe(false);
        moved.add(a);
      }
    }
    expect(moved.size).toBe(5 * TAGS_PER_EVENT);
  });

  it("refuses an exclusion that would leave too few assets to pick from", () => {
    const model = fleet(20, 3);
    const moved = new Set(Array.from({ length: 11 }, (_, i) => i));
    expect(() => model.churnReads(moved)).toThrow(/11 of 20 assets excluded/);
  });
});
