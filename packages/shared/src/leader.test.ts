import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { createPool } from "./db.ts";
import { createLogger } from "./logger.ts";
import { runAsLeader } from "./leader.ts";
import { createTestDatabase, eventually, type TestDatabase } from "./testing/index.ts";

let db: TestDatabase;
const pools: pg.Pool[] = [];
const logger = createLogger("leader-test", "silent");

beforeAll(async () => {
  db = await createTestDatabase("leader");
});
afterAll(async () => {
  for (const p of pools) await p.end().catch(() => undefined);
  await db?.drop();
});

let starts = 0;

function replica(name: string, running: Set<string>) {
  const pool = createPool(db.url, 3);
  pools.push(pool);
  return runAsLeader({
    pool,
    lock: "leader-test",
    logger,
    retryMs: 50,
    start: async () => {
      starts++;
      running.add(name);
      return [{ stop: async () => void running.delete(name) }];
    },
  });
}

describe("runAsLeader", () => {
  it("runs the workers on one replica; another takes over when it stops", async () => {
    const running = new Set<string>();
    const a = await replica("a", running);
    const b = await replica("b", running);
    expect(a.leading()).toBe(true);
    expect(b.leading()).toBe(false);
    expect([...running]).toEqual(["a"]);
    await a.stop();
    await eventually(async () => (b.leading() ? true : undefined), 5000, 20);
    expect([...running]).toEqual(["b"]);
    await b.stop();
    expect(running.size).toBe(0);
  });

  it("a leader whose database connection is dropped stops its workers; one replica leads again", async () => {
    const running = new Set<string>();
    const a = await replica("a", running);
    const b = await replica("b", running);
    expect(a.leading()).toBe(true);
    const startsBefore = starts;
    const admin = createPool(db.url, 1);
    pools.push(admin);
    // The leader's session is the one holding the advisory lock.
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(rows[0]!.n).toBe(1);
    // Whichever tries first after the drop leads (a itself may win again): its workers were started anew.
    await eventually(async () => (starts === startsBefore + 1 && Number(a.leading()) + Number(b.leading()) === 1 ? true : undefined), 10_000, 20);
    expect(running.size).toBe(1);
    expect([...running]).toEqual([a.leading() ? "a" : "b"]);
    await a.stop();
    await b.stop();
  });
});
