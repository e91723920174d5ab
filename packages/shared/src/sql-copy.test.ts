import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { createPool } from "./db.ts";
import { checkout, sqlQuery } from "./sql.ts";
import { BinaryCopyReader, copyLiteral, copyOutBinary } from "./sql-copy.ts";
import { createTestDatabase, type TestDatabase } from "./testing/index.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase("sql_copy");
  pool = createPool(db.url, 2);
  await pool.query(`CREATE TABLE outbox (id bigserial PRIMARY KEY, subject text NOT NULL, payload text, sent boolean NOT NULL DEFAULT false)`);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const text = (b: Buffer | null | undefined) => (b === null || b === undefined ? b : b.toString("utf8"));

describe("copyOutBinary", () => {
  it("returns each field as the UTF-8 bytes the server holds, NULL as null, with rows larger than a socket read intact", async () => {
    const big = `{"name":"${"Zürich ✓ ".repeat(300_000)}"}`; // about 3.3 MB: many socket reads, one CopyData message
    await pool.query(`INSERT INTO outbox (subject, payload) VALUES ('a', $1), ('b', NULL), ('c', '')`, [big]);
    const client = await checkout(pool);
    try {
      const rows = await copyOutBinary(client, `SELECT id::text, subject, payload FROM outbox ORDER BY id`);
      expect(rows.map((r) => r.map(text))).toEqual([
        ["1", "a", big],
        ["2", "b", null],
        ["3", "c", ""],
      ]);
      expect(rows[0]![2]!.equals(Buffer.from(big, "utf8"))).toBe(true);
    } finally {
      client.release();
    }
  });

  it("keeps every row's bytes when many rows arrive together (the parser reuses its buffer for later reads)", async () => {
    const client = await checkout(pool);
    try {
      const rows = await copyOutBinary(client, `SELECT g::text, repeat(lpad(g::text, 7, '0'), 1000 + g % 977) FROM generate_series(1, 600) g`);
      expect(rows).toHaveLength(600);
      rows.forEach((row, i) => {
        const g = i + 1;
        expect(text(row[0])).toBe(String(g));
        expect(text(row[1])).toBe(String(g).padStart(7, "0").repeat(1000 + (g % 977)));
      });
    } finally {
      client.release();
    }
  });

  it("runs a data-modifying statement with RETURNING inside the caller's transaction", async () => {
    const client = await checkout(pool);
    try {
      await client.query("BEGIN");
      const rows = await copyOutBinary(client, `UPDATE outbox SET sent = true WHERE id <= ${copyLiteral("2")} RETURNING id::text`);
      expect(rows.map((r) => text(r[0])).sort()).toEqual(["1", "2"]);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    expect(await sqlQuery<{ n: number }>(pool, `SELECT count(*)::int AS n FROM outbox WHERE sent`)).toEqual([{ n: 0 }]);
  });

  it("fails with a connection's query_timeout, and is refused on a pipelined connection", async () => {
    const timed = new pg.Pool({ connectionString: db.url, max: 1, query_timeout: 300 });
    try {
      const client = await timed.connect();
      try {
        expect((await copyOutBinary(client, `SELECT 'quick'::text`)).map((r) => text(r[0]))).toEqual(["quick"]);
        await expect(copyOutBinary(client, `SELECT pg_sleep(5)::text`)).rejects.toThrow(/timeout/i);
      } finally {
        client.release(true);
      }
    } finally {
      await timed.end();
    }
    const pipelined = createPool(db.url, 1, { pipeline: true });
    try {
      const client = await pipelined.connect();
      try {
        await expect(copyOutBinary(client, `SELECT 'x'::text`)).rejects.toThrow(/pipeline/);
      } finally {
        client.release();
      }
    } finally {
      await pipelined.end();
    }
  });

  it("returns no rows for an empty result", async () => {
    const client = await checkout(pool);
    try {
      expect(await copyOutBinary(client, `SELECT id FROM outbox WHERE false`)).toEqual([]);
    } finally {
      client.release();
    }
  });

  it("rejects with the server's error and leaves the connection usable", async () => {
    const client = await checkout(pool);
    try {
      await expect(copyOutBinary(client, `SELECT no_such_column FROM outbox`)).rejects.toThrow(/no_such_column/);
      expect((await client.query(`SELECT 1 AS one`)).rows).toEqual([{ one: 1 }]);
      // Queued behind a COPY, a statement still gets its own answer.
      const [copied, after] = await Promise.all([copyOutBinary(client, `SELECT 'x'::text`), client.query(`SELECT 2 AS two`)]);
      expect(copied.map((r) => text(r[0]))).toEqual(["x"]);
      expect(after.rows).toEqual([{ two: 2 }]);
    } finally {
      client.release();
    }
  });
});

describe("copyLiteral", () => {
  it("passes whole numbers and bigint digits, and refuses anything else", () => {
    expect(copyLiteral(0)).toBe("0");
    expect(copyLiteral(2_097_152)).toBe("2097152");
    expect(copyLiteral("9223372036854775807")).toBe("9223372036854775807");
    for (const bad of [1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2, "1; DROP TABLE outbox", "", "1e3"]) {
      expect(() => copyLiteral(bad)).toThrow(TypeError);
    }
  });
});

describe("BinaryCopyReader", () => {
  /** Binary COPY data received whole, in one message. */
  const parseBinaryCopy = (data: Buffer) => {
    const reader = new BinaryCopyReader();
    reader.push(data);
    return reader.finish();
  };
  /** Binary COPY data as the server writes it (signature, flags, header extension, rows, trailer). */
  const encode = (rows: Array<Array<string | null>>, extension = Buffer.alloc(0)) => {
    const parts = [Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(4), Buffer.alloc(4)];
    parts[2]!.writeUInt32BE(extension.length);
    parts.push(extension);
    for (const row of rows) {
      const count = Buffer.alloc(2);
      count.writeInt16BE(row.length);
      parts.push(count);
      for (const value of row) {
        const length = Buffer.alloc(4);
        const bytes = value === null ? undefined : Buffer.from(value, "utf8");
        length.writeInt32BE(bytes ? bytes.length : -1);
        parts.push(length, ...(bytes ? [bytes] : []));
      }
    }
    return Buffer.concat([...parts, Buffer.from([0xff, 0xff])]);
  };
  const rows = [["1", "é ✓", null], ["2", "", "x".repeat(300)], ["3", null, "{}"]];
  const decoded = (read: Array<Array<Buffer | null>>) => read.map((r) => r.map((b) => (b === null ? null : b.toString("utf8"))));

  it("reads the same rows however the data is divided into messages", () => {
    const data = encode(rows, Buffer.from("ext"));
    expect(decoded(parseBinaryCopy(data))).toEqual(rows);
    for (const size of [1, 2, 3, 7, 19, 64]) {
      const reader = new BinaryCopyReader();
      // Each piece is a view into one buffer that is overwritten after it is pushed, as pg's parser does.
      const scratch = Buffer.alloc(size);
      for (let at = 0; at < data.length; at += size) {
        const n = data.copy(scratch, 0, at, at + size);
        reader.push(scratch.subarray(0, n));
        scratch.fill(0x55);
      }
      expect(decoded(reader.finish())).toEqual(rows);
    }
  });

  it("refuses data without the signature, and data that ends inside a row", () => {
    expect(() => parseBinaryCopy(Buffer.from("1\tx\n".repeat(5)))).toThrow(/signature/);
    const data = encode(rows);
    expect(() => parseBinaryCopy(data.subarray(0, data.length - 10))).toThrow(/ended inside a row/);
  });
});
