import { describe, expect, it } from "vitest";
import { fnv1a, SeenValues } from "./seen-values.ts";

describe("SeenValues", () => {
  it("answers each value's first row, exactly as a Map would, across growth of every array", () => {
    const seen = new SeenValues();
    const reference = new Map<string, number>();
    // Repeats at every distance, multi-byte characters, the empty string: 150,000 distinct values.
    const wrong: string[] = [];
    for (let row = 1; row <= 300_000; row++) {
      const value = row % 2 ? `BLK-${row}` : row % 4 ? `tag:ÄÖ-${row >> 2}-✓` : `BLK-${row >> 3}`;
      const want = reference.get(value) ?? row;
      if (!reference.has(value)) reference.set(value, row);
      const got = seen.firstRow(value, row);
      if (got !== want) wrong.push(`${value}: ${got}, not ${want}`);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(seen.firstRow("", 300_001)).toBe(300_001);
    expect(seen.firstRow("", 300_002)).toBe(300_001);
    expect(seen.size).toBe(reference.size + 1);
  });

  it("tells apart distinct values whose hashes are equal", () => {
    // Found by search: two tag pairs with the same 32-bit FNV-1a hash.
    const [a, b] = ["rfid:TAG-112789", "rfid:TAG-349192"];
    expect(fnv1a(a)).toBe(fnv1a(b));
    const seen = new SeenValues();
    expect(seen.firstRow(a, 1)).toBe(1);
    expect(seen.firstRow(b, 2)).toBe(2);
    expect(seen.firstRow(b, 3)).toBe(2);
    expect(seen.firstRow(a, 4)).toBe(1);
  });
});
