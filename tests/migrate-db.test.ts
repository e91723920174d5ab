/**
 * The migrator (packages/shared db.ts, scripts/migrate.ts): Prisma's layout
 * and `_prisma_migrations` bookkeeping, in order, a transaction each, under
 * an advisory lock; applied twice is a no-op; concurrent runs migrate once;
 * an applied migration that changed is refused.
 */
import { createHash } from "node:crypto";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, listMigrations, migrate, migrationsDir } from "@whereabouts/shared";
import { createTestDatabase, type TestDatabase } from "@whereabouts/shared/testing";
import { migrateAll, SCHEMAS } from "../scripts/migrate.ts";

let db: TestDatabase;
let pool: pg.Pool;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase("migrate");
  pool = createPool(db.url, 4);
  dir = await mkdtemp(path.join(tmpdir(), "wa-migrations-"));
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function writeMigrations(root: string, migrations: Record<string, string>) {
  for (const [name, sql] of Object.entries(migrations)) {
    await mkdir(path.join(root, name), { recursive: true });
    await writeFile(path.join(root, name, "migration.sql"), sql);
  }
}

const rowsOf = async (schema: string) =>
  (
    await pool.query<{ id: string; checksum: string; migration_name: string; finished_at: Date | null; started_at: Date; rolled_back_at: Date | null; logs: string | null; applied_steps_count: number }>(
      `SELECT * FROM "${schema}"."_prisma_migrations" ORDER BY started_at, migration_name`,
    )
  ).rows;

describe("migrate()", () => {
  it("applies in name order, records Prisma's rows, and a second run is a no-op", async () => {
    const root = path.join(dir, "ordered");
    await writeMigrations(root, {
      "20260102000000_second": `ALTER TABLE "m1"."things" ADD COLUMN "label" TEXT;`,
      "20260101000000_first": `CREATE SCHEMA IF NOT EXISTS "m1"; CREATE TABLE "m1"."things" ("id" SERIAL PRIMARY KEY);`,
      "20260103000000_third": `CREATE INDEX "things_label_idx" ON "m1"."things"("label");`,
    });
    const first = await migrate({ connectionString: db.url, schema: "m1", migrationsDir: root });
    expect(first).toEqual({ schema: "m1", applied: ["20260101000000_first", "20260102000000_second", "20260103000000_third"], skipped: [] });

    const rows = await rowsOf("m1");
    expect(rows.map((r) => r.migration_name)).toEqual(first.applied);
    for (const row of rows) {
      const sql = await readFile(path.join(root, row.migration_name, "migration.sql"), "utf8");
      expect(row.checksum).toBe(createHash("sha256").update(sql).digest("hex"));
      expect(row.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(row.finished_at).toBeInstanceOf(Date);
      expect(row.finished_at!.getTime()).toBeGreaterThanOrEqual(row.started_at.getTime() - 1);
      expect(row).toMatchObject({ rolled_back_at: null, logs: null, applied_steps_count: 1 });
    }

    const again = await migrate({ connectionString: db.url, schema: "m1", migrationsDir: root });
    expect(again).toEqual({ schema: "m1", applied: [], skipped: first.applied });
    expect(await rowsOf("m1")).toEqual(rows);
  });

  it("only new migrations are applied later", async () => {
    const root = path.join(dir, "growing");
    await writeMigrations(root, { "001_a": `CREATE SCHEMA IF NOT EXISTS "m2"; CREATE TABLE "m2"."a" ("id" INT);` });
    expect((await migrate({ connectionString: db.url, schema: "m2", migrationsDir: root })).applied).toEqual(["001_a"]);
    await writeMigrations(root, { "002_b": `CREATE TABLE "m2"."b" ("id" INT);` });
    const next = await migrate({ connectionString: db.url, schema: "m2", migrationsDir: root });
    expect(next).toEqual({ schema: "m2", applied: ["002_b"], skipped: ["001_a"] });
  });

  it("two concurrent runs on a fresh database apply each migration once", async () => {
    const fresh = await createTestDatabase("migrate_race");
    const root = path.join(dir, "race");
    await writeMigrations(root, {
      "001_table": `CREATE SCHEMA IF NOT EXISTS "m3"; CREATE TABLE "m3"."t" ("id" INT);`,
      // Not idempotent: a second application would fail the run.
      "002_insert": `SELECT pg_sleep(0.2); INSERT INTO "m3"."t" VALUES (1);`,
      "003_column": `ALTER TABLE "m3"."t" ADD COLUMN "c" INT;`,
    });
    try {
      const results = await Promise.all([1, 2, 3].map(() => migrate({ connectionString: fresh.url, schema: "m3", migrationsDir: root })));
      expect(results.flatMap((r) => r.applied).sort()).toEqual(["001_table", "002_insert", "003_column"]);
      const client = new pg.Client({ connectionString: fresh.url });
      await client.connect();
      try {
        const { rows } = await client.query(`SELECT migration_name, count(*)::int AS n FROM "m3"."_prisma_migrations" GROUP BY 1 ORDER BY 1`);
        expect(rows).toEqual([
          { migration_name: "001_table", n: 1 },
          { migration_name: "002_insert", n: 1 },
          { migration_name: "003_column", n: 1 },
        ]);
        expect((await client.query(`SELECT count(*)::int AS n FROM "m3"."t"`)).rows[0].n).toBe(1);
      } finally {
        await client.end();
      }
    } finally {
      await fresh.drop();
    }
  });

  it("refuses an applied migration whose file changed, applying nothing", async () => {
    const root = path.join(dir, "modified");
    await writeMigrations(root, { "001_a": `CREATE SCHEMA IF NOT EXISTS "m4"; CREATE TABLE "m4"."a" ("id" INT);` });
    await migrate({ connectionString: db.url, schema: "m4", migrationsDir: root });
    await writeMigrations(root, {
      "001_a": `CREATE SCHEMA IF NOT EXISTS "m4"; CREATE TABLE "m4"."a" ("id" BIGINT);`,
      "002_b": `CREATE TABLE "m4"."b" ("id" INT);`,
    });
    await expect(migrate({ connectionString: db.url, schema: "m4", migrationsDir: root })).rejects.toThrow(/001_a was modified/);
    expect((await rowsOf("m4")).map((r) => r.migration_name)).toEqual(["001_a"]);
    const { rows } = await pool.query(`SELECT to_regclass('"m4"."b"') AS b`);
    expect(rows[0].b).toBeNull();
  });

  it("a failing migration is rolled back whole and not recorded; earlier ones stay", async () => {
    const root = path.join(dir, "failing");
    await writeMigrations(root, {
      "001_ok": `CREATE SCHEMA IF NOT EXISTS "m5"; CREATE TABLE "m5"."ok" ("id" INT);`,
      "002_bad": `CREATE TABLE "m5"."half" ("id" INT); SELECT * FROM "m5"."missing";`,
    });
    await expect(migrate({ connectionString: db.url, schema: "m5", migrationsDir: root })).rejects.toThrow(/002_bad failed/);
    expect((await rowsOf("m5")).map((r) => r.migration_name)).toEqual(["001_ok"]);
    const { rows } = await pool.query(`SELECT to_regclass('"m5"."half"') AS half, to_regclass('"m5"."ok"') AS ok`);
    expect(rows[0]).toEqual({ half: null, ok: "m5.ok" });
  });

  it("a schema without a migrations folder gets only its bookkeeping table", async () => {
    const result = await migrate({ connectionString: db.url, schema: "m6", migrationsDir: path.join(dir, "absent") });
    expect(result).toEqual({ schema: "m6", applied: [], skipped: [] });
    expect(await rowsOf("m6")).toEqual([]);
  });

  it("_prisma_migrations has Prisma's columns, types, nullability and defaults", async () => {
    const { rows } = await pool.query(
      `SELECT column_name, data_type, character_maximum_length AS len, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = 'm1' AND table_name = '_prisma_migrations'
        ORDER BY ordinal_position`,
    );
    expect(rows).toEqual([
      { column_name: "id", data_type: "character varying", len: 36, is_nullable: "NO", column_default: null },
      { column_name: "checksum", data_type: "character varying", len: 64, is_nullable: "NO", column_default: null },
      { column_name: "finished_at", data_type: "timestamp with time zone", len: null, is_nullable: "YES", column_default: null },
      { column_name: "migration_name", data_type: "character varying", len: 255, is_nullable: "NO", column_default: null },
      { column_name: "logs", data_type: "text", len: null, is_nullable: "YES", column_default: null },
      { column_name: "rolled_back_at", data_type: "timestamp with time zone", len: null, is_nullable: "YES", column_default: null },
      { column_name: "started_at", data_type: "timestamp with time zone", len: null, is_nullable: "NO", column_default: "now()" },
      { column_name: "applied_steps_count", data_type: "integer", len: null, is_nullable: "NO", column_default: "0" },
    ]);
    const pk = await pool.query(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = '"m1"."_prisma_migrations"'::regclass AND i.indisprimary`,
    );
    expect(pk.rows).toEqual([{ attname: "id" }]);
  });
});

describe("migrateAll (npm run migrate)", () => {
  it("migrates every service schema from its prisma folder, then is a no-op", async () => {
    const fresh = await createTestDatabase("migrate_all");
    try {
      const first = await migrateAll({ DATABASE_URL: fresh.url }, () => undefined);
      expect(first.map((r) => r.schema)).toEqual(SCHEMAS.map((s) => s.schema));
      for (const result of first) {
        const expected = (await listMigrations(migrationsDir(result.schema))).map((m) => m.name);
        expect(result.applied).toEqual(expected);
      }
      expect(first.find((r) => r.schema === "identity")!.applied.length).toBeGreaterThan(0);
      const second = await migrateAll({ DATABASE_URL: fresh.url }, () => undefined);
      for (const [i, result] of second.entries()) expect(result).toEqual({ schema: result.schema, applied: [], skipped: first[i]!.applied });
    } finally {
      await fresh.drop();
    }
  });

  it("a service's own <SERVICE>_DATABASE_URL wins over DATABASE_URL", async () => {
    const main = await createTestDatabase("migrate_main");
    const own = await createTestDatabase("migrate_own");
    try {
      await migrateAll({ DATABASE_URL: main.url, GATEWAY_DATABASE_URL: own.url }, () => undefined);
      const check = async (url: string) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          return (await client.query(`SELECT to_regclass('identity.organizations') AS t`)).rows[0].t;
        } finally {
          await client.end();
        }
      };
      expect(await check(own.url)).toBe("identity.organizations");
      expect(await check(main.url)).toBeNull();
    } finally {
      await main.drop();
      await own.drop();
    }
  });
});
