import { describe, expect, it } from "vitest";
import { ValidationGate } from "./bulk-import.ts";

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
    gate.advance(6);
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
