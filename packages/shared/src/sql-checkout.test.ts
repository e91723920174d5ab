import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { createPool } from "./db.ts";
import { checkout, sqlQueryOne } from "./sql.ts";
import { createTestDatabase, eventually, type TestDatabase } from "./testing/index.ts";

let db: TestDatabase;
let pool: pg.Pool;
let admin: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase("sql_checkout");
  pool = createPool(db.url, 2);
  admin = createPool(db.url, 1);
});
afterAll(async () => {
  await pool?.end();
  await admin?.end();
  await db?.drop();
});

describe("checkout", () => {
  it("a held connection the server drops fails its statements, not the process; the pool goes on", async () => {
    const client = await checkout(pool);
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    // Without a listener the client's 'error' event would be an uncaught exception here.
    await ended;
    await expect(client.query("SELECT 1")).rejects.toThrow();
    client.release(true);
    const row = await eventually(async () => sqlQueryOne<{ one: number }>(pool, "SELECT 1 AS one"));
    expect(row).toEqual({ one: 1 });
  });

  it("release() removes its listener, so a reused connection does not gather them", async () => {
    for (let i = 0; i < 5; i++) {
      const client = await checkout(pool);
      await client.query("SELECT 1");
      client.release();
    }
    const client = await checkout(pool);
    // The pool's own idle listener is off while it is out; ours is the only one.
    expect(client.listenerCount("error")).toBe(1);
    client.release();
  });
});
