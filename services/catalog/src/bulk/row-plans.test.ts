import { describe, expect, it } from "vitest";
import { RowPlans } from "./bulk-import.ts";

describe("RowPlans", () => {
  it("keeps each row's plan, counts a failed row once and creates as they stand, and grows with the file", () => {
    const plans = new RowPlans();
    plans.plan(1);
    plans.plan(2, 77);
    plans.fail(3);
    plans.fail(3);
    plans.plan(3); // a failed row stays failed
    plans.plan(5000, 2_000_000_000);
    plans.plan(1_000_000);
    expect(plans.get(1)).toEqual({ row: 1 });
    expect(plans.get(2)).toEqual({ row: 2, existingId: 77 });
    expect(plans.get(3)).toBeUndefined();
    expect(plans.failed(3)).toBe(true);
    expect(plans.get(4)).toBeUndefined();
    expect(plans.failed(4)).toBe(false);
    expect(plans.get(5000)).toEqual({ row: 5000, existingId: 2_000_000_000 });
    expect(plans.get(1_000_000)).toEqual({ row: 1_000_000 });
    expect(plans.get(2_000_000)).toBeUndefined();
    expect(plans.failedCount).toBe(1);
    expect(plans.creates).toBe(2);
    // A planned create that fails late (the write pass) is a failure, no longer a create.
    plans.fail(1);
    expect(plans.failedCount).toBe(2);
    expect(plans.creates).toBe(1);
  });
});
