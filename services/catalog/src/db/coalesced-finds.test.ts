/**
 * coalescedFinds: GETs by id handed over in one turn of the event loop share
 * a statement per organization; each caller gets what its own read would
 * have given, or its statement's error.
 */
import { describe, expect, it } from "vitest";
import { coalescedFinds, type FindStatements } from "./coalesced-finds.ts";

/** Statements over `views` ("org:id" → view) that record what they were asked. */
function recording(views: Record<string, string>, failing: Set<number> = new Set()) {
  const calls: string[] = [];
  const statements: FindStatements = {
    async find(orgId, id) {
      calls.push(`find ${orgId} ${id}`);
      if (failing.has(orgId)) throw new Error(`org ${orgId} failed`);
      return views[`${orgId}:${id}`];
    },
    async findMany(orgId, ids) {
      calls.push(`findMany ${orgId} ${ids.join(",")}`);
      if (failing.has(orgId)) throw new Error(`org ${orgId} failed`);
      return new Map(ids.flatMap((id) => (views[`${orgId}:${id}`] ? [[id, views[`${orgId}:${id}`]!] as const] : [])));
    },
  };
  return { statements, calls };
}

const views = { "1:1": "one", "1:2": "two", "1:3": "three", "2:1": "other org's one" };

describe("coalescedFinds", () => {
  it("reads the ids of one turn in one statement per organization, each caller getting its own record", async () => {
    const { statements, calls } = recording(views);
    const find = coalescedFinds(statements);
    const got = await Promise.all([find(1, 1), find(1, 2), find(2, 1), find(1, 9), find(1, 1)]);
    expect(got).toEqual(["one", "two", "other org's one", undefined, "one"]);
    // Org 1's four requests (id 1 twice) as one statement of three ids; org 2's one by the single-row statement.
    expect(calls).toEqual(["findMany 1 1,2,9", "find 2 1"]);
  });

  it("keeps a request that comes alone on the single-row statement, and starts a new batch in a later turn", async () => {
    const { statements, calls } = recording(views);
    const find = coalescedFinds(statements);
    expect(await find(1, 3)).toBe("three");
    expect(await Promise.all([find(1, 1), find(1, 2)])).toEqual(["one", "two"]);
    expect(calls).toEqual(["find 1 3", "findMany 1 1,2"]);
  });

  it("fails only the callers of the statement that failed", async () => {
    const { statements } = recording(views, new Set([2]));
    const find = coalescedFinds(statements);
    const [a, b, c] = await Promise.allSettled([find(1, 1), find(2, 1), find(2, 5)]);
    expect(a).toEqual({ status: "fulfilled", value: "one" });
    expect(b).toMatchObject({ status: "rejected", reason: new Error("org 2 failed") });
    expect(c).toMatchObject({ status: "rejected", reason: new Error("org 2 failed") });
  });
});
