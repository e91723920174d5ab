import { describe, expect, it } from "vitest";
import { ValidationGate, type DecidedRow } from "./bulk-import.ts";

const settled = async (p: Promise<void> | undefined) => {
  let state = "pending";
  p?.then(() => (state = "resolved"), () => (state = "rejected"));
  if (!p) return "decided";
  await new Promise<void>((r) => setImmediate(r));
  return state;
};

describe("ValidationGate", () => {
  it("lets a row through once validation decided it, or once validation is over", async () => {
    const gate = new ValidationGate();
    const row5 = gate.reach(5);
    const row9 = gate.reach(9);
    expect(await settled(row5)).toBe("pending");
    void gate.advance(6);
    expect(await settled(row5)).toBe("resolved");
    expect(await settled(row9)).toBe("pending");
    expect(await settled(gate.reach(6))).toBe("decided");
    gate.end();
    expect(await settled(row9)).toBe("resolved");
    expect(await settled(gate.reach(1000))).toBe("decided");
  });

  it("fails every waiting and later row when validation failed, and tells validation when the write stopped", async () => {
    const gate = new ValidationGate();
    const waiting = gate.reach(3);
    gate.end(new Error("csv broke"));
    await expect(waiting).rejects.toThrow("csv broke");
    await expect(gate.reach(1)).rejects.toThrow("csv broke");
    const other = new ValidationGate();
    expect(() => other.checkStopped()).not.toThrow();
    other.stop();
    expect(() => other.checkStopped()).toThrow("the write stopped");
  });
});

describe("ValidationGate's hand-over of decided rows", () => {
  const rows = (...numbers: number[]): DecidedRow[] => numbers.map((row) => ({ row, raw: { name: `row ${row}` }, request: { name: `row ${row}` } as DecidedRow["request"] }));

  it("hands the write each decided chunk once, in file order, then ends", async () => {
    const gate = new ValidationGate();
    const first = gate.take();
    expect(await settled(first.then(() => undefined))).toBe("pending");
    await gate.advance(2, rows(1, 2));
    expect((await first)?.map((r) => r.row)).toEqual([1, 2]);
    await gate.advance(4, rows(4)); // row 3 failed its rules: not handed over
    await gate.advance(6, rows(5, 6));
    expect((await gate.take())?.map((r) => r.row)).toEqual([4]);
    expect((await gate.take())?.map((r) => r.row)).toEqual([5, 6]);
    const last = gate.take();
    gate.end();
    expect(await last).toBeUndefined();
    expect(gate.decidedThrough).toBe(6);
  });

  it("makes validation wait while the write holds enough chunks, and lets it read on alone once the write takes no more", async () => {
    const gate = new ValidationGate();
    await gate.advance(1, rows(1));
    await gate.advance(2, rows(2));
    const third = gate.advance(3, rows(3));
    expect(await settled(third)).toBe("pending");
    await gate.take();
    expect(await settled(third)).toBe("resolved");
    const fourth = gate.advance(4, rows(4));
    expect(await settled(fourth)).toBe("pending");
    gate.close();
    expect(await settled(fourth)).toBe("resolved");
    // Closed: later rows are decided but held for nobody.
    expect(await settled(gate.advance(5, rows(5)))).toBe("resolved");
    gate.end();
    expect(await gate.take()).toBeUndefined();
  });

  it("fails the write's wait when validation failed", async () => {
    const gate = new ValidationGate();
    const waiting = gate.take();
    gate.end(new Error("csv broke"));
    await expect(waiting).rejects.toThrow("csv broke");
  });
});
