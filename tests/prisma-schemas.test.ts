/**
 * Every `prisma/<schema>/schema.prisma` must describe exactly what its SQL
 * migrations build: tables, columns, types, nullability, defaults that the
 * database owns, primary keys, unique constraints, indexes (columns in order,
 * sort order, method, names) and foreign keys. Indexes Prisma cannot express
 * are allowed only when the model names them in a comment line
 * `// raw index: <index_name> — <why>`.
 *
 * The schema is read with Prisma's own parser (@prisma/get-dmmf); the
 * database with the Postgres catalogs, after the project's migrator ran.
 */
import { readdirSync, existsSync, readFileSync } from "node:fs";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { getDMMF } from "@prisma/get-dmmf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, repoRoot } from "@whereabouts/shared";
import { createTestDatabase, type TestDatabase } from "@whereabouts/shared/testing";

/* ---------- the schema side ---------- */

interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: "scalar" | "object" | "enum" | "unsupported";
  isList: boolean;
  isRequired: boolean;
  type: string;
  nativeType?: [string, string[]] | null;
  hasDefaultValue: boolean;
  default?: unknown;
  relationFromFields?: string[];
  relationToFields?: string[];
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  schema: string | null;
  fields: DmmfField[];
}
interface DmmfIndex {
  model: string;
  type: "id" | "unique" | "normal" | "fulltext";
  dbName?: string | null;
  algorithm?: string;
  fields: Array<{ name: string; sortOrder?: "asc" | "desc" | "Asc" | "Desc" }>;
}
interface DmmfEnum {
  name: string;
  dbName?: string | null;
  values: Array<{ name: string; dbName?: string | null }>;
}
interface Datamodel {
  models: DmmfModel[];
  enums: DmmfEnum[];
  indexes: DmmfIndex[];
}

async function readDatamodel(text: string): Promise<Datamodel> {
  const result = (await getDMMF({ datamodel: text })) as unknown as { datamodel?: Datamodel; reason?: string };
  if (!result.datamodel) throw new Error(`schema.prisma does not parse: ${result.reason ?? "unknown error"}`);
  return result.datamodel;
}

/** `// raw index: <name> — <why>` lines, per model name. */
function rawIndexes(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  let model: string | undefined;
  for (const line of text.split("\n")) {
    const open = /^\s*model\s+(\w+)\s*\{/.exec(line);
    if (open) {
      model = open[1]!;
      out.set(model, new Set());
      continue;
    }
    if (/^\s*\}/.test(line)) {
      model = undefined;
      continue;
    }
    const raw = /^\s*\/\/\s*raw index:\s*([^\s—–]+)/.exec(line);
    if (raw && model) out.get(model)!.add(raw[1]!);
  }
  return out;
}

const PG_NAME_LIMIT = 63;

/** Prisma's default constraint names, truncated as Prisma does. */
function defaultName(table: string, columns: string[], suffix: "_pkey" | "_key" | "_idx" | "_fkey"): string {
  let base = suffix === "_pkey" ? table : `${table}_${columns.join("_")}`;
  if (base.length >= PG_NAME_LIMIT - suffix.length) base = base.slice(0, PG_NAME_LIMIT - suffix.length);
  return `${base}${suffix}`;
}

/** The Postgres type (as format_type prints it) Prisma creates for a field. */
function expectedType(field: DmmfField, enums: DmmfEnum[]): string {
  const [native, args = []] = field.nativeType ?? [];
  const precision = (name: string, zone: string) => (args[0] !== undefined ? `${name}(${args[0]}) ${zone}` : `${name} ${zone}`);
  let base: string;
  if (field.kind === "enum") {
    const e = enums.find((x) => x.name === field.type);
    base = e?.dbName ?? field.type;
  } else {
    switch (field.type) {
      case "Int":
        base = native === "SmallInt" ? "smallint" : native === "Oid" ? "oid" : "integer";
        break;
      case "BigInt":
        base = "bigint";
        break;
      case "Float":
        base = native === "Real" ? "real" : "double precision";
        break;
      case "Decimal":
        base = native === "Money" ? "money" : `numeric(${args[0] ?? 65},${args[1] ?? 30})`;
        break;
      case "Boolean":
        base = "boolean";
        break;
      case "String":
        switch (native) {
          case undefined:
          case "Text":
            base = "text";
            break;
          case "VarChar":
            base = args.length ? `character varying(${args[0]})` : "character varying";
            break;
          case "Char":
            base = `character(${args[0] ?? 1})`;
            break;
          case "Bit":
            base = `bit(${args[0] ?? 1})`;
            break;
          case "VarBit":
            base = args.length ? `bit varying(${args[0]})` : "bit varying";
            break;
          default:
            base = native.toLowerCase(); // Uuid, Xml, Inet, Citext
        }
        break;
      case "DateTime":
        if (native === "Timestamptz") base = precision("timestamp", "with time zone");
        else if (native === "Timestamp") base = precision("timestamp", "without time zone");
        else if (native === "Date") base = "date";
        else if (native === "Time") base = precision("time", "without time zone");
        else if (native === "Timetz") base = precision("time", "with time zone");
        else base = "timestamp(3) without time zone"; // Prisma's default precision
        break;
      case "Json":
        base = native === "Json" ? "json" : "jsonb";
        break;
      case "Bytes":
        base = "bytea";
        break;
      default:
        base = `(unknown Prisma type ${field.type})`;
    }
  }
  return field.isList ? `${base}[]` : base;
}

/** Precision 6 is Postgres' default: `timestamp(6) x` and `timestamp x` are one type. */
const normalizeType = (t: string) =>
  t
    .replace(/^(\w+)\./, "")
    .replace(/"/g, "")
    .replace(/^(timestamp|time)\(6\)/, "$1");

/* ---------- the database side ---------- */

interface DbColumn {
  table: string;
  column: string;
  type: string;
  not_null: boolean;
  default: string | null;
  identity: string;
}
interface DbIndex {
  table: string;
  name: string;
  unique: boolean;
  primary: boolean;
  partial: boolean;
  method: string;
  columns: Array<string | null>;
  descending: boolean[];
}
interface DbForeignKey {
  table: string;
  name: string;
  columns: string[];
  ref_schema: string;
  ref_table: string;
  ref_columns: string[];
}

async function readDatabase(client: pg.ClientBase, schema: string) {
  const tables = (
    await client.query<{ table: string }>(
      `SELECT c.relname AS table FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1`,
      [schema],
    )
  ).rows.map((r) => r.table);
  const columns = (
    await client.query<DbColumn>(
      `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
              a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default, a.attidentity AS identity
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
        WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname, a.attnum`,
      [schema],
    )
  ).rows;
  const indexes = (
    await client.query<DbIndex>(
      `SELECT tc.relname AS table, ic.relname AS name, i.indisunique AS unique, i.indisprimary AS primary,
              i.indpred IS NOT NULL AS partial, am.amname AS method,
              ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                      LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                     WHERE k.ord <= i.indnkeyatts ORDER BY k.ord) AS columns,
              ARRAY(SELECT (o.opt & 1) = 1 FROM unnest(i.indoption::int2[]) WITH ORDINALITY o(opt, ord)
                     WHERE o.ord <= i.indnkeyatts ORDER BY o.ord) AS descending
         FROM pg_index i
         JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_class tc ON tc.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = tc.relnamespace
         JOIN pg_am am ON am.oid = ic.relam
        WHERE n.nspname = $1 AND tc.relkind IN ('r', 'p') ORDER BY 1, 2`,
      [schema],
    )
  ).rows;
  const foreignKeys = (
    await client.query<DbForeignKey>(
      `SELECT tc.relname AS table, con.conname AS name, rn.nspname AS ref_schema, rc.relname AS ref_table,
              ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(attnum, ord)
                      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.ord) AS columns,
              ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(attnum, ord)
                      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum ORDER BY k.ord) AS ref_columns
         FROM pg_constraint con
         JOIN pg_class tc ON tc.oid = con.conrelid JOIN pg_namespace n ON n.oid = tc.relnamespace
         JOIN pg_class rc ON rc.oid = con.confrelid JOIN pg_namespace rn ON rn.oid = rc.relnamespace
        WHERE con.contype = 'f' AND n.nspname = $1 ORDER BY 1, 2`,
      [schema],
    )
  ).rows;
  const enums = (
    await client.query<{ name: string; labels: string[] }>(
      `SELECT t.typname::text AS name, array_agg(e.enumlabel::text ORDER BY e.enumsortorder) AS labels
         FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = $1 GROUP BY 1 ORDER BY 1`,
      [schema],
    )
  ).rows;
  return { tables, columns, indexes, foreignKeys, enums };
}

/* ---------- the comparison ---------- */

/**
 * Every way `schema.prisma` (text) and the migrated database (schemas
 * `defaultSchema` plus any @@schema) disagree, one line each; [] when they agree.
 */
async function compareSchema(client: pg.ClientBase, text: string, defaultSchema: string): Promise<string[]> {
  const dm = await readDatamodel(text);
  const raw = rawIndexes(text);
  const relationMode = /relationMode\s*=\s*"prisma"/.test(text) ? "prisma" : "foreignKeys";
  const problems: string[] = [];
  const schemas = [...new Set([defaultSchema, ...dm.models.map((m) => m.schema ?? defaultSchema)])];
  const db = new Map<string, Awaited<ReturnType<typeof readDatabase>>>();
  for (const schema of schemas) db.set(schema, await readDatabase(client, schema));

  const tableOf = (model: DmmfModel) => model.dbName ?? model.name;
  const columnOf = (model: DmmfModel, fieldName: string) => {
    const f = model.fields.find((x) => x.name === fieldName);
    return f?.dbName ?? fieldName;
  };

  for (const model of dm.models) {
    const schema = model.schema ?? defaultSchema;
    const table = tableOf(model);
    const where = `${schema}.${table}`;
    const state = db.get(schema)!;
    if (!state.tables.includes(table)) {
      problems.push(`${where}: table missing in the database (model ${model.name})`);
      continue;
    }

    // Columns: types, nullability, database defaults.
    const dbColumns = state.columns.filter((c) => c.table === table);
    const scalars = model.fields.filter((f) => f.kind !== "object");
    for (const field of scalars) {
      const name = field.dbName ?? field.name;
      const column = dbColumns.find((c) => c.column === name);
      if (!column) {
        problems.push(`${where}.${name}: column missing in the database (field ${field.name})`);
        continue;
      }
      if (field.kind !== "unsupported") {
        const expected = expectedType(field, dm.enums);
        if (normalizeType(column.type) !== normalizeType(expected)) {
          problems.push(`${where}.${name}: type is ${column.type}, schema says ${expected}`);
        }
      }
      // Prisma creates list columns nullable; either is fine for them.
      if (!field.isList && field.isRequired !== column.not_null) {
        problems.push(`${where}.${name}: ${column.not_null ? "NOT NULL" : "nullable"} in the database, schema says ${field.isRequired ? "required" : "optional"}`);
      }
      const def = field.default as { name?: string } | undefined;
      const fn = def && typeof def === "object" && !Array.isArray(def) ? def.name : undefined;
      if (fn === "autoincrement") {
        if (!/^nextval\(/.test(column.default ?? "") && column.identity === "") {
          problems.push(`${where}.${name}: autoincrement in the schema, but no sequence default in the database`);
        }
      } else if (fn === "now") {
        if (!/^(CURRENT_TIMESTAMP|now\(\))/i.test(column.default ?? "")) {
          problems.push(`${where}.${name}: @default(now()) in the schema, database default is ${column.default ?? "none"}`);
        }
      } else if (fn === "uuid" || fn === "cuid" || fn === "nanoid" || fn === "ulid") {
        // Generated by the client; the database may or may not have a default.
      } else if (field.hasDefaultValue) {
        if (column.default === null) problems.push(`${where}.${name}: the schema has a default, the database none`);
      } else if (column.default !== null && !field.isList) {
        problems.push(`${where}.${name}: the database has default ${column.default}, the schema none`);
      }
    }
    for (const column of dbColumns) {
      if (!scalars.some((f) => (f.dbName ?? f.name) === column.column)) {
        problems.push(`${where}.${column.column}: column in the database but not in the schema`);
      }
    }

    // Primary key, unique and plain indexes.
    const declared = dm.indexes.filter((i) => i.model === model.name && i.type !== "fulltext");
    const rawNames = raw.get(model.name) ?? new Set<string>();
    const dbIndexes = state.indexes.filter((i) => i.table === table);
    const matched = new Set<string>();
    for (const index of declared) {
      const columns = index.fields.map((f) => columnOf(model, f.name));
      const suffix = index.type === "id" ? "_pkey" : index.type === "unique" ? "_key" : "_idx";
      const name = index.dbName ?? defaultName(table, columns, suffix);
      const label = `${where}: ${index.type === "id" ? "primary key" : index.type === "unique" ? "unique index" : "index"} ${name} (${columns.join(", ")})`;
      const found = dbIndexes.find((i) => i.name === name);
      if (!found) {
        problems.push(`${label} missing in the database`);
        continue;
      }
      matched.add(name);
      if (JSON.stringify(found.columns) !== JSON.stringify(columns)) {
        problems.push(`${label}: the database has columns (${found.columns.map((c) => c ?? "<expression>").join(", ")})`);
      }
      if (index.type === "id" && !found.primary) problems.push(`${label}: not the primary key in the database`);
      if (index.type !== "id" && found.primary) problems.push(`${label}: is the primary key in the database`);
      if ((index.type !== "normal") !== found.unique) problems.push(`${label}: ${found.unique ? "unique" : "not unique"} in the database`);
      if (found.partial) problems.push(`${label}: partial in the database (name it in a raw index comment instead)`);
      const descending = index.fields.map((f) => (f.sortOrder ?? "asc").toLowerCase() === "desc");
      if (JSON.stringify(found.descending) !== JSON.stringify(descending)) {
        problems.push(`${label}: sort order differs (database ${found.descending.map((d) => (d ? "DESC" : "ASC")).join(", ")})`);
      }
      const method = (index.algorithm ?? "BTree").toLowerCase();
      if (found.method !== method) problems.push(`${label}: method ${found.method} in the database, schema says ${method}`);
    }
    if (!declared.some((i) => i.type === "id")) problems.push(`${where}: the model has no primary key (Prisma needs @id or @@id)`);
    for (const index of dbIndexes) {
      if (matched.has(index.name)) continue;
      if (rawNames.has(index.name)) {
        matched.add(index.name);
        continue;
      }
      problems.push(`${where}: index ${index.name} in the database is not in the schema (declare it, or name it in a "// raw index:" comment)`);
    }
    for (const name of rawNames) {
      if (!dbIndexes.some((i) => i.name === name)) problems.push(`${where}: raw index ${name} is named in the schema but missing in the database`);
    }

    // Foreign keys: one per relation field that holds the reference.
    const relations = model.fields.filter((f) => f.kind === "object" && (f.relationFromFields?.length ?? 0) > 0);
    const dbForeignKeys = state.foreignKeys.filter((fk) => fk.table === table);
    const usedForeignKeys = new Set<string>();
    if (relationMode === "foreignKeys") {
      for (const relation of relations) {
        const target = dm.models.find((m) => m.name === relation.type)!;
        const columns = relation.relationFromFields!.map((f) => columnOf(model, f));
        const refColumns = relation.relationToFields!.map((f) => columnOf(target, f));
        const fk = dbForeignKeys.find(
          (k) =>
            JSON.stringify(k.columns) === JSON.stringify(columns) &&
            k.ref_table === tableOf(target) &&
            k.ref_schema === (target.schema ?? defaultSchema) &&
            JSON.stringify(k.ref_columns) === JSON.stringify(refColumns),
        );
        if (!fk) problems.push(`${where}: foreign key (${columns.join(", ")}) → ${tableOf(target)}(${refColumns.join(", ")}) missing in the database`);
        else usedForeignKeys.add(fk.name);
      }
    }
    for (const fk of dbForeignKeys) {
      if (!usedForeignKeys.has(fk.name)) {
        problems.push(`${where}: foreign key ${fk.name} (${fk.columns.join(", ")}) → ${fk.ref_schema}.${fk.ref_table} in the database is not a relation in the schema`);
      }
    }
  }

  // Tables nobody declared, and enums.
  for (const schema of schemas) {
    const state = db.get(schema)!;
    for (const table of state.tables) {
      if (table === "_prisma_migrations") continue;
      if (!dm.models.some((m) => (m.schema ?? defaultSchema) === schema && tableOf(m) === table)) {
        problems.push(`${schema}.${table}: table in the database but not in the schema`);
      }
    }
  }
  for (const e of dm.enums) {
    const name = e.dbName ?? e.name;
    const labels = e.values.map((v) => v.dbName ?? v.name);
    const found = [...db.values()].flatMap((s) => s.enums).find((x) => x.name === name);
    if (!found) problems.push(`enum ${name} missing in the database`);
    else if (JSON.stringify(found.labels) !== JSON.stringify(labels)) {
      problems.push(`enum ${name}: database values (${found.labels.join(", ")}), schema (${labels.join(", ")})`);
    }
  }
  return problems;
}

/* ---------- the tests ---------- */

const prismaDir = path.join(repoRoot, "prisma");
const schemaNames = readdirSync(prismaDir, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(path.join(prismaDir, d.name, "schema.prisma")))
  .map((d) => d.name)
  .sort();

let db: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase("prisma_schemas");
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

describe("schema.prisma agrees with its migrations", () => {
  it("finds the identity schema at least", () => {
    expect(schemaNames).toContain("identity");
  });

  for (const name of schemaNames) {
    it(`prisma/${name}`, async () => {
      await migrate({ connectionString: db.url, schema: name, migrationsDir: path.join(prismaDir, name, "migrations") });
      const text = readFileSync(path.join(prismaDir, name, "schema.prisma"), "utf8");
      expect(await compareSchema(client, text, name)).toEqual([]);
    });
  }
});

describe("the comparison catches drift", () => {
  const SCHEMA = `
datasource db {
  provider = "postgresql"
  schemas  = ["drift"]
}

enum Kind {
  one
  two
  @@schema("drift")
}

model Parent {
  id       Int      @id @default(autoincrement())
  name     String   @db.VarChar(80)
  kind     Kind     @default(one)
  tags     String[]
  data     Json     @default("{}")
  at       DateTime @default(now()) @map("created_at") @db.Timestamptz(3)
  children Child[]

  // raw index: parents_name_lower_idx — lower(name) lookups
  @@unique([name, kind], map: "parents_name_kind_key")
  @@index([at(sort: Desc), id])
  @@map("parents")
  @@schema("drift")
}

model Child {
  orgId    Int     @map("org_id")
  id       BigInt
  parentId Int?    @map("parent_id")
  parent   Parent? @relation(fields: [parentId], references: [id])
  note     String?

  @@id([orgId, id])
  @@index([parentId])
  @@map("children")
  @@schema("drift")
}
`;
  const SQL = `
CREATE SCHEMA IF NOT EXISTS "drift";
CREATE TYPE "drift"."Kind" AS ENUM ('one', 'two');
CREATE TABLE "drift"."parents" (
  "id" SERIAL NOT NULL,
  "name" VARCHAR(80) NOT NULL,
  "kind" "drift"."Kind" NOT NULL DEFAULT 'one',
  "tags" TEXT[],
  "data" JSONB NOT NULL DEFAULT '{}',
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "parents_pkey" PRIMARY KEY ("id")
);
CREATE TABLE "drift"."children" (
  "org_id" INTEGER NOT NULL,
  "id" BIGINT NOT NULL,
  "parent_id" INTEGER,
  "note" TEXT,
  CONSTRAINT "children_pkey" PRIMARY KEY ("org_id", "id")
);
CREATE UNIQUE INDEX "parents_name_kind_key" ON "drift"."parents"("name", "kind");
CREATE INDEX "parents_created_at_id_idx" ON "drift"."parents"("created_at" DESC, "id");
CREATE INDEX "parents_name_lower_idx" ON "drift"."parents"(lower("name"));
CREATE INDEX "children_parent_id_idx" ON "drift"."children"("parent_id");
ALTER TABLE "drift"."children" ADD CONSTRAINT "children_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "drift"."parents"("id") ON DELETE SET NULL ON UPDATE CASCADE;
`;
  let dir: string;
  let counter = 0;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "wa-drift-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Applies SQL (with `drift` renamed to a fresh schema) and compares it with the schema text. */
  async function problemsFor(schemaText: string, sql: string): Promise<string[]> {
    const schema = `drift_${++counter}`;
    const root = path.join(dir, schema);
    await mkdir(path.join(root, "001_init"), { recursive: true });
    await writeFile(path.join(root, "001_init", "migration.sql"), sql.replaceAll('"drift"', `"${schema}"`));
    await migrate({ connectionString: db.url, schema, migrationsDir: root });
    return compareSchema(client, schemaText.replaceAll('"drift"', `"${schema}"`), schema);
  }

  it("a schema and migration that agree give no problem", async () => {
    expect(await problemsFor(SCHEMA, SQL)).toEqual([]);
  });

  const mutations: Array<[label: string, sql: (s: string) => string, expected: RegExp, schema?: (s: string) => string]> = [
    ["a column type", (s) => s.replace('"name" VARCHAR(80)', '"name" VARCHAR(81)'), /parents\.name: type is character varying\(81\), schema says character varying\(80\)/],
    ["a timestamp precision", (s) => s.replace("TIMESTAMPTZ(3)", "TIMESTAMPTZ(6)"), /created_at: type is timestamp\(6\) with time zone/],
    ["jsonb as json", (s) => s.replace('"data" JSONB', '"data" JSON'), /data: type is json, schema says jsonb/],
    ["an enum column as text", (s) => s.replace(`"kind" "drift"."Kind" NOT NULL DEFAULT 'one'`, `"kind" TEXT NOT NULL DEFAULT 'one'`), /kind: type is text, schema says Kind/],
    ["a missing NOT NULL", (s) => s.replace('"name" VARCHAR(80) NOT NULL', '"name" VARCHAR(80)'), /parents\.name: nullable in the database, schema says required/],
    ["an extra NOT NULL", (s) => s.replace('"note" TEXT', '"note" TEXT NOT NULL'), /children\.note: NOT NULL in the database, schema says optional/],
    ["a lost autoincrement", (s) => s.replace('"id" SERIAL NOT NULL', '"id" INTEGER NOT NULL'), /parents\.id: autoincrement in the schema/],
    ["a lost now() default", (s) => s.replace(" DEFAULT CURRENT_TIMESTAMP", ""), /created_at: @default\(now\(\)\) in the schema/],
    ["a default the schema lacks", (s) => s.replace('"note" TEXT', `"note" TEXT DEFAULT 'x'`), /children\.note: the database has default/],
    ["an extra column", (s) => s.replace('"note" TEXT,', '"note" TEXT,\n  "extra" INT,'), /children\.extra: column in the database but not in the schema/],
    ["a missing column", (s) => s.replace('"note" TEXT,', ""), /children\.note: column missing/],
    ["a missing table", (s) => s.replace(/CREATE TABLE "drift"\."children"[\s\S]*?\);/, "").replace(/CREATE INDEX "children[^\n]*\n/, "").replace(/ALTER TABLE "drift"\."children"[^\n]*\n/, ""), /children: table missing/],
    ["an extra table", (s) => `${s}\nCREATE TABLE "drift"."stray" ("id" INT PRIMARY KEY);`, /drift_\d+\.stray: table in the database but not in the schema/],
    ["a missing index", (s) => s.replace(/CREATE INDEX "children_parent_id_idx"[^\n]*\n/, ""), /index children_parent_id_idx \(parent_id\) missing/],
    ["an undeclared index", (s) => `${s}\nCREATE INDEX "children_note_idx" ON "drift"."children"("note");`, /index children_note_idx in the database is not in the schema/],
    ["index columns in another order", (s) => s.replace('ON "drift"."parents"("name", "kind")', 'ON "drift"."parents"("kind", "name")'), /parents_name_kind_key \(name, kind\): the database has columns \(kind, name\)/],
    ["a unique index made plain", (s) => s.replace('CREATE UNIQUE INDEX "parents_name_kind_key"', 'CREATE INDEX "parents_name_kind_key"'), /parents_name_kind_key .*not unique in the database/],
    ["a plain index made unique", (s) => s.replace('CREATE INDEX "children_parent_id_idx"', 'CREATE UNIQUE INDEX "children_parent_id_idx"'), /children_parent_id_idx .*unique in the database/],
    ["a lost DESC", (s) => s.replace('("created_at" DESC, "id")', '("created_at", "id")'), /parents_created_at_id_idx .*sort order differs/],
    ["an index renamed", (s) => s.replace('"parents_created_at_id_idx"', '"parents_at_idx"'), /parents_created_at_id_idx .*missing in the database[\s\S]*index parents_at_idx in the database is not in the schema/],
    ["a partial declared index", (s) => s.replace('ON "drift"."children"("parent_id");', 'ON "drift"."children"("parent_id") WHERE "note" IS NULL;'), /children_parent_id_idx .*partial/],
    ["a primary key on other columns", (s) => s.replace('PRIMARY KEY ("org_id", "id")', 'PRIMARY KEY ("id", "org_id")'), /primary key children_pkey \(org_id, id\): the database has columns \(id, org_id\)/],
    ["a raw index that is missing", (s) => s.replace(/CREATE INDEX "parents_name_lower_idx"[^\n]*\n/, ""), /raw index parents_name_lower_idx is named in the schema but missing/],
    ["a foreign key the schema lacks", (s) => `${s}\nALTER TABLE "drift"."children" ADD CONSTRAINT "children_org_fkey" FOREIGN KEY ("org_id", "id") REFERENCES "drift"."children"("org_id", "id");`, /foreign key children_org_fkey .* is not a relation/],
    ["a missing foreign key", (s) => s.replace(/ALTER TABLE "drift"\."children" ADD CONSTRAINT "children_parent_id_fkey"[^\n]*\n/, ""), /foreign key \(parent_id\) → parents\(id\) missing/],
    ["an enum value", (s) => s.replace("('one', 'two')", "('one', 'two', 'three')"), /enum Kind: database values \(one, two, three\)/],
    [
      "an index named by no raw comment",
      (s) => s,
      /index parents_name_lower_idx in the database is not in the schema/,
      (t) => t.replace("  // raw index: parents_name_lower_idx — lower(name) lookups\n", ""),
    ],
  ];
  for (const [label, sql, expected, schema] of mutations) {
    it(`reports ${label}`, async () => {
      const problems = await problemsFor(schema ? schema(SCHEMA) : SCHEMA, sql(SQL));
      expect(problems.join("\n")).toMatch(expected);
    });
  }

  it("Prisma's default names are truncated to 63 characters as Prisma does", () => {
    const long = "a_table_name_that_goes_on_and_on_for_quite_a_while";
    expect(defaultName(long, ["first_column", "second_column"], "_idx")).toBe(`${`${long}_first_column_second_column`.slice(0, 59)}_idx`);
    expect(defaultName(long, ["first_column", "second_column"], "_idx")).toHaveLength(63);
    expect(defaultName("t", ["a", "b"], "_key")).toBe("t_a_b_key");
    expect(defaultName("t", [], "_pkey")).toBe("t_pkey");
  });
});
