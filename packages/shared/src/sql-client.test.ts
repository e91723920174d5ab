import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool } from "./db.ts";
import { arrayLiteral, PLANNED_ARRAY_LENGTH, sqlQuery, statementParams } from "./sql.ts";
import { isLockConflict, sqlQueryOne, sqlStateOf } from "./sql.ts";
import { ConnectionWaitTimeoutError, createSqlClient, TransactionTimeoutError, type SqlClient, type SqlRunner } from "./sql-client.ts";
import { createTestDatabase, type TestDatabase } from "./testing/index.ts";

let db: TestDatabase;
let client: SqlClient;

beforeAll(async () => {
  db = await createTestDatabase("sql_client");
  client = createSqlClient(db.url, { max: 4 });
  await client.$executeRawUnsafe(`CREATE TABLE things (id bigint PRIMARY KEY, label text, at timestamptz, day date, local timestamp, doc jsonb, amount numeric)`);
});
afterAll(async () => {
  await client?.$disconnect();
  await db?.drop();
});

const BIG = 9007199254740993n; // past Number.MAX_SAFE_INTEGER: a number would round it

describe("values, as Prisma's pg adapter returned them", () => {
  it("round-trips BigInt parameters and reads int8 and int8[] as BigInt", async () => {
    const at = new Date("2026-03-04T05:06:07.890Z");
    await client.$executeRawUnsafe(
      `INSERT INTO things (id, label, at, day, local, doc, amount) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      BIG,
      null,
      at,
      at,
      at,
      { a: [1, "x"] },
      "12.50",
    );
    const rows = await client.$queryRawUnsafe<Array<Record<string, unknown>>>(
      `SELECT id, label, at, day, local, doc, amount, ARRAY[id, NULL, 2] AS ids FROM things WHERE id = ANY($1::bigint[])`,
      [BIG, 1n],
    );
    expect(rows).toEqual([
      {
        id: BIG,
        label: null,
        at,
        day: new Date("2026-03-04T00:00:00.000Z"),
        local: at,
        doc: { a: [1, "x"] },
        amount: "12.50",
        ids: [BIG, null, 2n],
      },
    ]);
  });

  it("leaves the pool's own parsers alone (sql.ts's helpers still read int8 as text)", async () => {
    const row = await sqlQueryOne<{ id: unknown }>(client.pool, `SELECT id FROM things WHERE id = $1`, [BIG.toString()]);
    expect(row).toEqual({ id: BIG.toString() });
  });

  it("returns the affected row count from $executeRawUnsafe", async () => {
    await client.$executeRawUnsafe(`INSERT INTO things (id, label) SELECT g, 'n' FROM generate_series(100, 104) g`);
    expect(await client.$executeRawUnsafe(`UPDATE things SET label = $1 WHERE id BETWEEN $2 AND $3`, "m", 101n, 103n)).toBe(3);
    expect(await client.$executeRawUnsafe(`DELETE FROM things WHERE id = $1`, -1)).toBe(0);
  });

  it("prepares statements with parameters once per connection, unless made with prepare: false", async () => {
    const prepared = async (c: SqlClient) =>
      c.$transaction(async (tx) => {
        await tx.$queryRawUnsafe(`SELECT $1::int + 40 AS n`, 2);
        return tx.$queryRawUnsafe<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%+ 40 AS n'`);
      });
    const unprepared = createSqlClient(db.url, { max: 1, prepare: false });
    try {
      expect(await prepared(client)).toEqual([{ n: 1 }]);
      expect(await prepared(unprepared)).toEqual([{ n: 0 }]);
    } finally {
      await unprepared.$disconnect();
    }
  });


  it("runs a statement whose arrays hold a batch unnamed, through both SQL surfaces: planned for the rows it carries", async () => {
    // Joined CTEs over unnest: a generic plan takes each for 10 rows and may join them in a nested loop.
    const text = (tag: string) =>
      `WITH a AS (SELECT * FROM unnest($1::int[]) AS a(id)), b AS (SELECT * FROM unnest($1::int[]) AS b(id))
       SELECT count(*)::int AS n, '${tag}' AS tag FROM a JOIN b USING (id)`;
    const preparedAs = (tx: SqlRunner, tag: string) =>
      tx.$queryRawUnsafe<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%''${tag}'' AS tag%'`);
    const ids = (n: number) => Array.from({ length: n }, (_, i) => i);
    const counts = await client.$transaction(async (tx) => {
      const answers: number[] = [];
      for (const n of [PLANNED_ARRAY_LENGTH, PLANNED_ARRAY_LENGTH + 1]) {
        answers.push((await tx.$queryRawUnsafe<Array<{ n: number }>>(text(`client ${n}`), ids(n)))[0]!.n);
      }
      return { answers, small: await preparedAs(tx, `client ${PLANNED_ARRAY_LENGTH}`), batch: await preparedAs(tx, `client ${PLANNED_ARRAY_LENGTH + 1}`) };
    });
    expect(counts).toEqual({ answers: [PLANNED_ARRAY_LENGTH, PLANNED_ARRAY_LENGTH + 1], small: [{ n: 1 }], batch: [{ n: 0 }] });

    const connection = await client.pool.connect();
    try {
      await sqlQuery(connection, text("pool small"), [ids(3)]);
      await sqlQuery(connection, text("pool batch"), [ids(5000)]);
      const listed = await sqlQuery<{ statement: string }>(connection, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%''pool %'' AS tag%' AND statement NOT LIKE '%pg_prepared_statements%'`);
      expect(listed.map((r) => r.statement.match(/'pool (\w+)'/)![1])).toEqual(["small"]);
    } finally {
      connection.release();
    }
  });
  it("runs parameterless text as a simple query (several statements)", async () => {
    const rows = await client.$queryRawUnsafe<Array<{ n: number }>>(`SET LOCAL work_mem = '8MB'; SELECT 7 AS n`);
    expect(rows).toEqual([{ n: 7 }]);
  });
});

describe("$transaction", () => {
  it("commits what the work wrote and returns its result", async () => {
    const result = await client.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`INSERT INTO things (id, label) VALUES ($1, 'committed')`, 200n);
      return "done";
    });
    expect(result).toBe("done");
    expect(await client.$queryRawUnsafe(`SELECT label FROM things WHERE id = 200`)).toEqual([{ label: "committed" }]);
  });

  it("rolls back and rethrows the work's own error", async () => {
    const failure = new Error("the work failed");
    await expect(
      client.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(`INSERT INTO things (id, label) VALUES ($1, 'rolled back')`, 201n);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await client.$queryRawUnsafe(`SELECT id FROM things WHERE id = 201`)).toEqual([]);
  });

  it("expires a transaction past its timeout: the running statement is cancelled, later ones refused, nothing kept", async () => {
    let afterExpiry: unknown;
    const run = client.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe(`INSERT INTO things (id, label) VALUES ($1, 'too slow')`, 202n);
        // Would hold the transaction open for a minute; the timeout cancels it.
        await tx.$queryRawUnsafe(`SELECT pg_sleep(60)`).catch(() => undefined);
        afterExpiry = await tx.$executeRawUnsafe(`INSERT INTO things (id, label) VALUES ($1, 'after expiry')`, 203n).catch((err: unknown) => err);
        return "resolved anyway";
      },
      { timeout: 300 },
    );
    await expect(run).rejects.toBeInstanceOf(TransactionTimeoutError);
    expect(afterExpiry).toBeInstanceOf(TransactionTimeoutError);
    expect(await client.$queryRawUnsafe(`SELECT id FROM things WHERE id IN (202, 203)`)).toEqual([]);
    // The connection went back to the pool usable.
    expect(await client.$transaction((tx) => tx.$queryRawUnsafe(`SELECT 1 AS ok`))).toEqual([{ ok: 1 }]);
  });

  it("gives up waiting for a connection after maxWait, and the late connection returns to the pool", async () => {
    const small = createSqlClient(createPool(db.url, 1));
    try {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      const first = small.$transaction(async (tx) => {
        await tx.$queryRawUnsafe(`SELECT 1`);
        holding();
        await gate;
      });
      await held;
      await expect(small.$transaction(async () => "never", { maxWait: 100 })).rejects.toBeInstanceOf(ConnectionWaitTimeoutError);
      release();
      await first;
      expect(await small.$transaction((tx) => tx.$queryRawUnsafe(`SELECT 2 AS ok`), { maxWait: 5000 })).toEqual([{ ok: 2 }]);
    } finally {
      await small.$disconnect();
    }
  });
});

describe("sqlStateOf", () => {
  it("reads the SQLSTATE of a failed statement, outside and inside a transaction", async () => {
    const outside = await client.$queryRawUnsafe(`SELECT * FROM no_such_table`).catch((err: unknown) => err);
    expect(sqlStateOf(outside)).toBe("42P01");
    const inside = await client
      .$transaction((tx) => tx.$executeRawUnsafe(`INSERT INTO things (id) VALUES ($1), ($1)`, 300n))
      .catch((err: unknown) => err);
    expect(sqlStateOf(inside)).toBe("23505");
  });

  it("reads Prisma's driver-adapter shape and follows causes", () => {
    const prismaShaped = Object.assign(new Error("Raw query failed"), { code: "P2010", meta: { driverAdapterError: { cause: { originalCode: "40P01" } } } });
    expect(sqlStateOf(prismaShaped)).toBe("40P01");
    expect(isLockConflict(prismaShaped)).toBe(true);
    const wrapped = new Error("batch failed", { cause: Object.assign(new Error("lock timeout"), { code: "55P03" }) });
    expect(sqlStateOf(wrapped)).toBe("55P03");
    expect(isLockConflict(wrapped)).toBe(true);
    expect(sqlStateOf(Object.assign(new Error("socket"), { code: "ECONNRESET" }))).toBeUndefined();
    expect(sqlStateOf(Object.assign(new Error("socket"), { code: "EPIPE" }))).toBeUndefined();
    expect(sqlStateOf(Object.assign(new Error("Raw query failed"), { code: "P2010" }))).toBeUndefined();
    expect(sqlStateOf(Object.assign(new Error("raise"), { code: "P0001" }))).toBe("P0001");
    expect(sqlStateOf(new Error("mentions 40P01 in its text only"))).toBeUndefined();
    expect(isLockConflict(new Error("deadlock detected"))).toBe(false);
  });
});

describe("array literals (arrayLiteral)", () => {
  it("round-trip through Postgres as the arrays they were built from", async () => {
    const texts = ["plain", "2026-11-27T08:00:00.123456Z", "", "NULL", "null", "a b", "a,b", '"q"', "back\\slash", "{x}", "tab\tx", "ünï", null];
    const ints = [1, -2, 0, 2147483647, null];
    const bools = [true, false, null];
    const [row] = await client.$queryRawUnsafe<Array<{ texts: Array<string | null>; ints: Array<number | null>; bools: Array<boolean | null>; n: number }>>(
      `SELECT $1::text[] AS texts, $2::int[] AS ints, $3::bool[] AS bools, cardinality($4::int[]) AS n`,
      arrayLiteral(texts),
      arrayLiteral(ints),
      arrayLiteral(bools),
      arrayLiteral([]),
    );
    expect(row).toEqual({ texts, ints, bools, n: 0 });
  });

  it("round-trip arrays of numbers only (joined in one call), microseconds since the epoch included", async () => {
    const ids = [7, -2, 0, 2147483647];
    const micros = [1795883717249123, -1, 0];
    const [row] = await client.$queryRawUnsafe<Array<{ ids: number[]; micros: string[] }>>(
      `SELECT $1::int[] AS ids, $2::bigint[]::text[] AS micros`,
      arrayLiteral(ids),
      arrayLiteral(micros),
    );
    expect(arrayLiteral(ids)).toBe("{7,-2,0,2147483647}");
    expect(row).toEqual({ ids, micros: micros.map(String) });
  });

  it("are what statementParams makes of arrays of plain values, and only of those", () => {
    const when = new Date("2026-11-27T08:00:00Z");
    expect(statementParams([[1, null, "a b", true], "x", 7, [when], [[1, 2]], [{ k: 1 }], []])).toEqual([
      '{1,NULL,"a b",t}',
      "x",
      7,
      [when],
      [[1, 2]],
      [{ k: 1 }],
      "{}",
    ]);
  });

  it("are how plain JS arrays go out, through both SQL surfaces; other arrays go as node-postgres sends them", async () => {
    const texts = ["plain", "", "NULL", "a,b", '"q"', "back\\slash", "{x}", "ünï", null];
    const ints = [3, null, -1];
    const sql = `SELECT $1::text[] AS texts, $2::int[] AS ints, $3::timestamptz[] AS times, $4::bigint[] AS big`;
    const expected = { texts, ints, times: [new Date("2026-11-27T08:00:00.123Z")], big: ["9007199254740993"] };
    const [viaRunner] = await client.$queryRawUnsafe<Array<Record<string, unknown>>>(sql, texts, ints, [new Date("2026-11-27T08:00:00.123Z")], [9007199254740993n]);
    expect({ ...viaRunner, big: (viaRunner!.big as unknown[]).map(String) }).toEqual(expected);
    const pool = createPool(db.url, 1);
    try {
      const [viaPool] = await sqlQuery<Record<string, unknown>>(pool, sql, [texts, ints, [new Date("2026-11-27T08:00:00.123Z")], ["9007199254740993"]]);
      expect({ ...viaPool, big: (viaPool!.big as unknown[]).map(String) }).toEqual(expected);
    } finally {
      await pool.end();
    }
  });
});

