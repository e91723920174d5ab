import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, sessionOptions } from "./db.ts";
import { createTestDatabase, type TestDatabase } from "./testing/index.ts";

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase("db_session");
});
afterAll(async () => {
  await db?.drop();
});

async function setting(name: string, pgOptions: string | undefined): Promise<string> {
  const saved = process.env.PGOPTIONS;
  if (pgOptions === undefined) delete process.env.PGOPTIONS;
  else process.env.PGOPTIONS = pgOptions;
  const pool = createPool(db.url, 1);
  if (saved === undefined) delete process.env.PGOPTIONS;
  else process.env.PGOPTIONS = saved;
  try {
    const { rows } = await pool.query<Record<string, string>>(`SHOW ${name}`);
    return rows[0]![name]!;
  } finally {
    await pool.end();
  }
}

describe("service connections", () => {
  // A bulk chunk's statement spent 40 of its 120 ms compiling expressions it then ran once.
  it("run with JIT compilation off", async () => {
    expect(await setting("jit", undefined)).toBe("off");
  });

  it("take the operator's PGOPTIONS too, which win over the services' own", async () => {
    expect(await setting("jit", "-c jit=on")).toBe("on");
    expect(await setting("statement_timeout", "-c statement_timeout=1234")).toBe("1234ms");
    expect(await setting("jit", "-c statement_timeout=1234")).toBe("off");
    expect(sessionOptions("  ")).toBe("-c jit=off");
  });
});
