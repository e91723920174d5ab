/**
 * Bulk upload of assets and the CSV export (EXTENSIONS.md section 3) against
 * a real stack: multipart upload streamed to the object store, the job and
 * its progress, the row rules (the API's), abort and skip, upsert counts,
 * CSV details (BOM, quoting, CRLF), header problems, the 64 MiB cap, export
 * then re-import, scopes, tenant isolation and a catalog restart.
 */
import { spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, repoRoot } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { exportAssets } from "../services/catalog/src/assets/asset-store.ts";
import { BULK_CHUNK_ROWS } from "../services/catalog/src/bulk/bulk-import.ts";
import { readAssetQuery } from "../services/catalog/src/handlers/asset-handlers.ts";
import { JOB_LEASE_MS } from "../services/catalog/src/bulk/job-store.ts";
import { BULK_TRIGRAM_INDEXES, TRIGRAM_INDEX_OPTIONS } from "../services/catalog/src/bulk/trigram-indexes.ts";
import { startStack, type Stack } from "./harness.ts";
import { spawnService, waitForReadiness } from "./ops-support.ts";

let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;
let pool: pg.Pool;

beforeAll(async () => {
  stack = await startStack({ label: "bulk_upload" });
  t = await stack.tenant("Bulk Org");
  pool = createPool(stack.db.url, 2);
}, 120_000);
afterAll(async () => {
  await pool?.end();
  await stack?.close();
});

/** A promise with its resolve at hand: the test opens it when the moment comes. */
function gate<T = void>() {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Restarts catalog so that a job stops after writing its first chunk of rows
 * (inside its transaction): `reached` opens with the rows read, and the job
 * goes on once the test opens `release`, or once the catalog's stop aborts it.
 */
async function holdJobsAfterFirstChunk() {
  const reached = gate<number>();
  const release = gate();
  await stack.stopService("catalog");
  await stack.startService("catalog", {
    bulkHooks: {
      afterChunk: async (_job, rowsRead, signal) => {
        reached.open(rowsRead);
        const stopped = new Promise<void>((resolve) => (signal?.aborted ? resolve() : signal?.addEventListener("abort", () => resolve(), { once: true })));
        await Promise.race([release.promise, stopped]);
      },
    },
  });
  return { reached, release };
}

const sql = async <T>(text: string, values: unknown[] = []) => (await pool.query(text, values)).rows as T[];

/** The outbox's events one per row (`o` the outbox row, `e` the event): a bulk job's batch messages unpacked. */
const OUTBOX_EVENTS = `catalog.outbox_events o
  CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN o.subject LIKE '%.batch.events' THEN o.payload::jsonb->'events' ELSE jsonb_build_array(o.payload::jsonb) END) AS e`;

const BOUNDARY = "----whereabouts-test-boundary";

function multipart(parts: Array<{ name: string; value: string | Buffer; filename?: string }>): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(
      Buffer.from(
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"${part.filename ? `; filename="${part.filename}"` : ""}\r\n` +
          (part.filename ? "Content-Type: text/csv\r\n" : "") +
          "\r\n",
      ),
    );
    chunks.push(Buffer.isBuffer(part.value) ? part.value : Buffer.from(part.value));
    chunks.push(Buffer.from("\r\n"));
  }
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

async function upload(csv: string | Buffer, options: { mode?: string; on_error?: string; auth?: Record<string, string> } = {}) {
  const parts: Array<{ name: string; value: string | Buffer; filename?: string }> = [{ name: "file", value: csv, filename: "assets.csv" }];
  if (options.mode) parts.push({ name: "mode", value: options.mode });
  if (options.on_error) parts.push({ name: "on_error", value: options.on_error });
  return stack.gateway.inject({
    method: "POST",
    url: "/api/v1/assets/bulk",
    headers: { ...(options.auth ?? t.auth), "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    payload: multipart(parts),
  });
}

async function finished(location: string, auth = t.auth, timeoutMs = 60_000) {
  return eventually(async () => {
    const res = await stack.gateway.inject({ method: "GET", url: location, headers: auth });
    const job = res.json().data;
    return job.status === "succeeded" || job.status === "failed" ? job : undefined;
  }, timeoutMs, 100);
}

async function run(csv: string | Buffer, options: { mode?: string; on_error?: string } = {}) {
  const res = await upload(csv, options);
  expect(res.statusCode, res.body).toBe(202);
  expect(res.headers.location).toBe(`/api/v1/jobs/${res.json().data.id}`);
  return finished(res.headers.location as string);
}

const asset = async (key: string) => {
  const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets?external_key=${key}&include_deleted=false`, headers: t.auth });
  return res.json().data[0];
};

describe("upload", () => {
  it("creates the rows as a job (202, Location), with tags; the job reports its counts", async () => {
    const csv = "external_key,name,description,is_active,metadata,tags\nBK-1,Pump one,first,true,\"{\"\"site\"\":\"\"north\"\"}\",rfid:BK-T1|barcode:BK-B1\nBK-2,Pump two,,false,,rfid:BK-T2\n";
    const res = await upload(csv);
    expect(res.statusCode).toBe(202);
    expect(res.json().data).toMatchObject({ kind: "assets.bulk", status: "queued", rows_done: 0, errors: [] });
    const job = await finished(res.headers.location as string);
    expect(job).toMatchObject({ status: "succeeded", rows_total: 2, rows_done: 2, created: 2, updated: 0, unchanged: 0, failed_rows: 0, errors: [] });
    expect(Date.parse(job.started_at)).toBeLessThanOrEqual(Date.parse(job.finished_at));
    const one = await asset("BK-1");
    expect(one).toMatchObject({ name: "Pump one", description: "first", is_active: true, metadata: { site: "north" } });
    expect(one.tags.map((tag: { tag_type: string; value: string }) => `${tag.tag_type}:${tag.value}`).sort()).toEqual(["barcode:BK-B1", "rfid:BK-T1"]);
    expect(await asset("BK-2")).toMatchObject({ name: "Pump two", description: null, is_active: false });
  });

  it("each created asset's events carry what reading it shows: its view (created), then each tag's record (attached), by tag id", async () => {
    const csv = [
      "external_key,name,description,is_active,metadata,valid_from,valid_to,tags",
      'EV-1,Event one,described,true,"{""site"":""north"",""n"":1.50}",2026-01-01T00:00:00.123456Z,2099-01-01T00:00:00Z,rfid:EV-T1|barcode:EV-B1',
      "EV-2,Event two,,false,,,,",
      "EV-3,Event three,,true,,,,ble:EV-L3",
    ].join("\n");
    expect(await run(csv)).toMatchObject({ status: "succeeded", created: 3 });
    type Event = { verb: string; entity_version: number; data: Record<string, unknown> & { id: number } };
    // Every event of these rows, in publishing order (outbox row, then place in its batch message).
    const events = (
      await sql<{ e: Event }>(
        `SELECT x.e FROM catalog.outbox_events o
           CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN o.subject LIKE '%.batch.events' THEN o.payload::jsonb->'events' ELSE jsonb_build_array(o.payload::jsonb) END) WITH ORDINALITY AS x(e, n)
          WHERE o.org_id = $1 AND (x.e->'data'->>'external_key' LIKE 'EV-%' OR x.e->'data'->>'value' LIKE 'EV-%')
          ORDER BY o.id, x.n`,
        [t.orgId],
      )
    ).map((r) => r.e);
    const seen: string[] = [];
    const attachedIds: number[] = [];
    for (const e of events) {
      if (e.verb === "created") {
        const read = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${e.data.id}`, headers: t.auth });
        expect(e.data).toEqual(read.json().data);
        expect(e.entity_version).toBe(1);
        seen.push(`created ${e.data.external_key}`);
      } else {
        const owner = (await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${e.data.owner_id}`, headers: t.auth })).json().data;
        const tag = owner.tags.find((x: { id: number }) => x.id === e.data.id);
        expect(e.data).toEqual({ ...tag, owner_type: "asset", owner_id: owner.id, deleted_at: null });
        seen.push(`${e.verb} ${e.data.tag_type}:${e.data.value} of ${owner.external_key}`);
        attachedIds.push(e.data.id);
      }
    }
    expect(seen).toEqual([
      "created EV-1",
      "attached rfid:EV-T1 of EV-1",
      "attached barcode:EV-B1 of EV-1",
      "created EV-2",
      "created EV-3",
      "attached ble:EV-L3 of EV-3",
    ]);
    expect(attachedIds).toEqual([...attachedIds].sort((a, b) => a - b));
  });

  it("abort (default): any bad row and nothing is written; errors name row, field and code", async () => {
    const csv = [
      "external_key,name,is_active,metadata,valid_from,tags",
      "AB-1,Good,true,,,rfid:AB-T1",
      "AB-2,Bad active,maybe,,,",
      "AB-3,Bad metadata,,[1],,",
      "AB-4,Bad json,,{nope,,",
      "bad key!,Bad key,,,,",
      "AB-5,Bad time,,,2026-02-30T00:00:00Z,",
      "AB-1,Duplicate key,,,,",
      "AB-6,Duplicate tag,,,,rfid:AB-T1",
      "AB-7,,,,,",
      "AB-8,Bad tag,,,,rfid",
    ].join("\n");
    const job = await run(csv);
    expect(job).toMatchObject({ status: "failed", rows_total: 10, created: 0, failed_rows: 9 });
    const byRow = Object.fromEntries(job.errors.map((e: { row: number; field: string; code: string }) => [e.row, `${e.field}:${e.code}`]));
    expect(byRow).toEqual({
      2: "is_active:invalid_value",
      3: "metadata:invalid_value",
      4: "metadata:invalid_value",
      5: "external_key:invalid_value",
      6: "valid_from:invalid_value",
      7: "external_key:conflict",
      8: "tags:conflict",
      9: "name:too_short",
      10: "tags:invalid_value",
    });
    expect(await asset("AB-1")).toBeUndefined();
  });

  it("abort: bad rows chunks into the file, while the write follows validation, leave nothing written and are all listed", async () => {
    const lines = ["external_key,name,tags"];
    const good = BULK_CHUNK_ROWS * 3;
    for (let i = 1; i <= good; i++) lines.push(`LB-${i},Asset ${i},rfid:LB-T${i}`);
    lines.push("LB-BAD,,"); // row good + 1: no name
    lines.push(`LB-${good + 2},Fine again,`);
    lines.push("LB-1,Key of row 1,"); // row good + 3
    const job = await run(`${lines.join("\n")}\n`);
    expect(job).toMatchObject({ status: "failed", rows_total: good + 3, created: 0, updated: 0, failed_rows: 2 });
    expect(job.errors.map((e: { row: number; field: string }) => [e.row, e.field])).toEqual([
      [good + 1, "name"],
      [good + 3, "external_key"],
    ]);
    const [written] = await sql<{ assets: number; events: number }>(
      `SELECT (SELECT count(*)::int FROM catalog.assets WHERE org_id = $1 AND external_key LIKE 'LB-%') AS assets,
              (SELECT count(*)::int FROM ${OUTBOX_EVENTS} WHERE o.org_id = $1 AND e->'data'->>'external_key' LIKE 'LB-%') AS events`,
      [t.orgId],
    );
    expect(written).toEqual({ assets: 0, events: 0 });
  });

  it("lists at most 1,000 row errors, the first ones by row, while counting every failed row", async () => {
    const lines = ["external_key,name"];
    for (let i = 1; i <= 1200; i++) lines.push(i % 2 ? `CAP-${i},` : `CAP-${i},Good ${i}`); // odd rows: no name
    for (let i = 1201; i <= 1500; i++) lines.push(`CAP-${i},`);
    const job = await run(`${lines.join("\n")}\n`, { on_error: "skip" });
    expect(job).toMatchObject({ status: "succeeded", rows_total: 1500, created: 600, failed_rows: 900 });
    expect(job.errors).toHaveLength(900);
    const refused = await run(`${lines.join("\n").replaceAll("CAP-", "CAQ-").replace(/,Good \d+/g, ",")}\n`);
    expect(refused).toMatchObject({ status: "failed", rows_total: 1500, created: 0, failed_rows: 1500 });
    expect(refused.errors).toHaveLength(1000);
    expect(refused.errors.map((e: { row: number }) => e.row)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(refused.errors[0]).toMatchObject({ row: 1, field: "name", code: "too_short" });
  });

  it("duplicates are found across chunks of the file and reported on the later row, naming the earlier one", async () => {
    // Rows are checked in chunks of BULK_CHUNK_ROWS: the repeats sit in later chunks than their first use.
    const lines = ["external_key,name,tags"];
    for (let i = 1; i <= BULK_CHUNK_ROWS * 2 + 10; i++) lines.push(`XC-${i},Asset ${i},rfid:XC-T${i}`);
    const far = BULK_CHUNK_ROWS * 2 + 11;
    lines.push(`XC-10,Key of row 10,rfid:XC-NEW1`); // row far: key of row 10
    lines.push(`XC-NEW2,Tag of row 20,rfid:XC-T20`); // row far + 1: tag of row 20
    lines.push(`XC-10,Key of row 10 again,rfid:XC-NEW3`); // row far + 2: still row 10's key (row far took nothing)
    lines.push(`XC-NEW4,Tag of row far,rfid:XC-NEW1`); // row far + 3: the failed row far recorded no tags: free
    lines.push(`XC-NEW5,Tag of this chunk,rfid:XC-NEW1`); // row far + 4: tag of row far + 3, same chunk
    const job = await run(`${lines.join("\n")}\n`, { on_error: "skip" });
    expect(job).toMatchObject({ status: "succeeded", rows_total: far + 4, created: far, failed_rows: 4 });
    expect(job.errors.map((e: { row: number; field: string; message: string }) => [e.row, e.field, e.message])).toEqual([
      [far, "external_key", "external_key 'XC-10' is also on row 10"],
      [far + 1, "tags", "the tag rfid:XC-T20 is also on row 20"],
      [far + 2, "external_key", "external_key 'XC-10' is also on row 10"],
      [far + 4, "tags", `the tag rfid:XC-NEW1 is also on row ${far + 3}`],
    ]);
    expect((await asset("XC-NEW4")).tags.map((tag: { value: string }) => tag.value)).toEqual(["XC-NEW1"]);
  });

  it("skip writes the good rows and lists the bad ones", async () => {
    const job = await run("external_key,name\nSK-1,One\nSK-2,\nSK-3,Three\n", { on_error: "skip" });
    expect(job).toMatchObject({ status: "succeeded", rows_total: 3, created: 2, failed_rows: 1 });
    expect(job.errors).toEqual([expect.objectContaining({ row: 2, field: "name", code: "too_short" })]);
    expect(await asset("SK-1")).toBeDefined();
    expect(await asset("SK-2")).toBeUndefined();
  });

  it("upsert updates by live key with the PATCH rules: unchanged rows keep updated_at; create refuses existing keys", async () => {
    await run("external_key,name,description\nUP-1,First,a\nUP-2,Second,b\n");
    const before = await asset("UP-2");
    const job = await run("external_key,name,description\nUP-1,First renamed,a\nUP-2,Second,b\nUP-3,Third,c\n");
    expect(job).toMatchObject({ status: "succeeded", created: 1, updated: 1, unchanged: 1 });
    expect((await asset("UP-1")).name).toBe("First renamed");
    expect((await asset("UP-2")).updated_at).toBe(before.updated_at);
    const refused = await run("external_key,name\nUP-1,Again\n", { mode: "create" });
    expect(refused).toMatchObject({ status: "failed", errors: [expect.objectContaining({ row: 1, field: "external_key", code: "conflict" })] });
    const badMode = await upload("external_key,name\nX-1,x\n", { mode: "merge" });
    expect(badMode.statusCode).toBe(400);
    expect(badMode.json().error.fields).toEqual([expect.objectContaining({ field: "mode", code: "invalid_value" })]);
  });

  it("reads a BOM, quoted fields with commas and newlines, CRLF; a row with too many fields is a row error", async () => {
    const csv = '\uFEFFexternal_key,name,description\r\nQ-1,"Pump, large","line one\r\nline two"\r\nQ-2,Plain,"said ""hi"""\r\nQ-3,Extra,x,y\r\n';
    const job = await run(csv, { on_error: "skip" });
    expect(job).toMatchObject({ status: "succeeded", rows_total: 3, created: 2, failed_rows: 1 });
    expect(job.errors).toEqual([expect.objectContaining({ row: 3, field: "(row)", code: "invalid_value" })]);
    expect(await asset("Q-1")).toMatchObject({ name: "Pump, large", description: "line one\r\nline two" });
    expect((await asset("Q-2")).description).toBe('said "hi"');
  });

  it("header problems are 400 at upload: an empty file, no name column, an unknown column; a header alone is a job of 0 rows", async () => {
    const empty = await upload("");
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error.fields).toEqual([expect.objectContaining({ field: "file", code: "required" })]);
    const noName = await upload("external_key,description\nA,b\n");
    expect(noName.statusCode).toBe(400);
    expect(noName.json().error.fields).toEqual([expect.objectContaining({ field: "name", code: "required" })]);
    const unknown = await upload("name,colour\nA,red\n");
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.fields).toEqual([expect.objectContaining({ field: "colour", code: "unknown_field" })]);
    const headerOnly = await run("external_key,name\n");
    expect(headerOnly).toMatchObject({ status: "succeeded", rows_total: 0, created: 0 });
  });

  it("refuses a body over 64 MiB with 413, a non-multipart body with 415, a missing file part with 400", async () => {
    const big = Buffer.alloc(64 * 1024 * 1024 + 1, 0x61);
    const res = await stack.gateway.inject({
      method: "POST",
      url: "/api/v1/assets/bulk",
      headers: { ...t.auth, "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
      payload: big,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.type).toBe("payload_too_large");
    const json = await stack.gateway.inject({ method: "POST", url: "/api/v1/assets/bulk", headers: t.auth, payload: { name: "x" } });
    expect(json.statusCode).toBe(415);
    const noFile = await stack.gateway.inject({
      method: "POST",
      url: "/api/v1/assets/bulk",
      headers: { ...t.auth, "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
      payload: multipart([{ name: "mode", value: "upsert" }]),
    });
    expect(noFile.statusCode).toBe(400);
    expect(noFile.json().error.fields).toEqual([expect.objectContaining({ field: "file", code: "required" })]);
  });
});

describe("export", () => {
  it("GET /api/v1/assets with Accept: text/csv streams every page; re-importing it changes nothing", async () => {
    const rows = Array.from({ length: 1205 }, (_, i) => `EX-${String(i).padStart(4, "0")},Export ${i},,true,,rfid:EXT-${i}`);
    const created = await run(["external_key,name,description,is_active,metadata,tags", ...rows].join("\n"));
    expect(created).toMatchObject({ status: "succeeded", created: 1205 });
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets?q=EX-&limit=5", headers: { ...t.auth, accept: "text/csv" } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/csv/);
    const lines = res.body.trim().split("\r\n");
    expect(lines[0]).toBe("external_key,name,description,is_active,valid_from,valid_to,metadata,tags");
    expect(lines).toHaveLength(1206);
    expect(lines[1]).toMatch(/^EX-0000,Export 0,,true,/);
    const again = await run(res.body);
    expect(again).toMatchObject({ status: "succeeded", rows_total: 1205, created: 0, updated: 0, unchanged: 1205, failed_rows: 0 });
    // Chunks follow each other by keyset in any sort, descending too (several rows share each name's prefix order).
    const byName = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets?q=EX-&sort=-name", headers: { ...t.auth, accept: "text/csv" } });
    expect(byName.statusCode).toBe(200);
    const names = byName.body.trim().split("\r\n").slice(1).map((line) => line.split(",")[1]!);
    expect(names).toHaveLength(1205);
    expect(new Set(names).size).toBe(1205);
    expect(names).toEqual([...names].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)));
    const bad = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets?colour=red", headers: { ...t.auth, accept: "text/csv" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.type).toBe("validation_error");
  });
});

describe("export with q", () => {
  it("walks the sort order where matches are dense and gathers them where sparse: every match, in order, chunk after chunk", async () => {
    const rows = Array.from({ length: 40 }, (_, i) => `SP-${String(i).padStart(4, "0")},Sparse ${i},,true,,rfid:SPARSE-${i % 7 === 0 ? "HIT" : "MISS"}-${i}`);
    expect(await run(["external_key,name,description,is_active,metadata,tags", ...rows].join("\n"))).toMatchObject({ status: "succeeded", created: 40 });
    const keys = (indexes: number[]) => indexes.map((i) => `SP-${String(i).padStart(4, "0")}`);
    // q matching all 40 (dense, after the organization's other assets in key order), then every 7th by a tag value (sparse).
    for (const [q, expected] of [["SP-", keys(Array.from({ length: 40 }, (_, i) => i))], ["SPARSE-HIT", keys([0, 7, 14, 21, 28, 35])]] as const) {
      // The list's rule finds the same rows.
      const listed = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets?q=${q}&limit=100`, headers: t.auth });
      expect(listed.json().data.map((a: { external_key: string }) => a.external_key)).toEqual(expected);

      const { filters, sort } = readAssetQuery({ query: { q: [q] } } as never);
      const found: string[] = [];
      let after: string[] | undefined;
      for (let chunks = 1; ; chunks++) {
        // Three matches a chunk at most, six rows walked at most.
        const chunk = await exportAssets(pool, t.orgId, filters, sort, after, 3, 6);
        found.push(...chunk.data.map((view) => (JSON.parse(view) as { external_key: string }).external_key));
        if (chunk.done) break;
        expect(chunk.cursor).toBeDefined();
        after = chunk.cursor;
        expect(chunks).toBeLessThan(100);
      }
      expect(found).toEqual(expected);
      // Through the gateway, in one response.
      const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets?q=${q}`, headers: { ...t.auth, accept: "text/csv" } });
      expect(res.body.trim().split("\r\n").slice(1).map((line) => line.split(",")[0])).toEqual(expected);
    }
  });
});

describe("jobs", () => {
  it("are isolated per organization and need assets:write; uploads need assets:write", async () => {
    const res = await upload("name\nIsolated\n");
    const other = await stack.tenant("Bulk Other");
    const elsewhere = await stack.gateway.inject({ method: "GET", url: res.headers.location as string, headers: other.auth });
    expect(elsewhere.statusCode).toBe(404);
    const reader = await stack.createKey({ org: t.orgId, scopes: "assets:read" });
    const readerAuth = { authorization: `Bearer ${reader.key}` };
    expect((await stack.gateway.inject({ method: "GET", url: res.headers.location as string, headers: readerAuth })).statusCode).toBe(403);
    expect((await upload("name\nNope\n", { auth: readerAuth })).statusCode).toBe(403);
    expect((await stack.gateway.inject({ method: "GET", url: "/api/v1/jobs/abc", headers: t.auth })).statusCode).toBe(400);
    await finished(res.headers.location as string);
  });

  it("a job queued before a catalog restart runs after it", async () => {
    const res = await upload("external_key,name\nRS-1,Restarted\n");
    await stack.stopService("catalog");
    await stack.startService("catalog");
    const job = await finished(res.headers.location as string);
    expect(job).toMatchObject({ status: "succeeded", created: 1 });
    expect(await asset("RS-1")).toBeDefined();
  });

  it("tags of a finished job resolve for scans at once", async () => {
    const location = (await stack.gateway.inject({ method: "POST", url: "/api/v1/locations", headers: t.auth, payload: { name: "Bulk dock", external_key: "BULK-DOCK" } })).json().data;
    await run("external_key,name,tags\nSC-1,Scanned,rfid:SC-TAG-1\n");
    const scanned = await asset("SC-1");
    const { publishScan } = await import("../services/tracking/src/testing/tracking-fixtures.ts");
    await publishScan(stack.nc, t.orgId, { observed_at: "2026-11-24T09:00:00Z", location: { id: location.id }, tags: [{ tag_type: "rfid", value: "SC-TAG-1" }] });
    const history = await eventually(async () => {
      const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/assets/${scanned.id}/history`, headers: t.auth });
      return res.json().data.length === 1 ? res.json().data : undefined;
    }, 20_000);
    expect(history[0]).toMatchObject({ location_id: location.id });
  });

  it("a catalog stopped while a job writes: its transaction rolls back, nothing shows, and the restarted catalog runs it once", async () => {
    // The job stops after its first chunk of rows is written, inside its transaction, until the test lets it go.
    const { reached } = await holdJobsAfterFirstChunk();
    // More than one chunk: the job is held mid-file.
    const total = BULK_CHUNK_ROWS + 500;
    const rows = Array.from({ length: total }, (_, i) => `MID-${i},Mid job ${i},rfid:MID-T${i}`);
    const res = await upload(["external_key,name,tags", ...rows].join("\n"));
    expect(res.statusCode).toBe(202);
    const jobId = res.json().data.id;
    expect(await reached.promise).toBe(BULK_CHUNK_ROWS);
    const midKeys = `SELECT count(*)::int AS n FROM catalog.assets WHERE org_id = $1 AND external_key LIKE 'MID-%'`;
    // Written but not committed: nobody sees the first chunk.
    expect((await sql<{ n: number }>(midKeys, [t.orgId]))[0]!.n).toBe(0);
    // Held until the stop aborts it (released before, a job this fast could commit first).
    await stack.stopService("catalog");
    // Rolled back (no asset, no tag, no event) and queued again for the next worker.
    expect((await sql<{ n: number }>(midKeys, [t.orgId]))[0]!.n).toBe(0);
    expect((await sql<{ n: number }>(`SELECT count(*)::int AS n FROM catalog.tags WHERE org_id = $1 AND value LIKE 'MID-T%'`, [t.orgId]))[0]!.n).toBe(0);
    expect((await sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${OUTBOX_EVENTS} WHERE e->'data'->>'external_key' LIKE 'MID-%'`))[0]!.n).toBe(0);
    expect((await sql<{ status: string; created: number }>(`SELECT status, created FROM catalog.jobs WHERE id = $1`, [jobId]))[0]).toEqual({ status: "queued", created: 0 });

    await stack.startService("catalog");
    const job = await finished(res.headers.location as string);
    expect(job).toMatchObject({ status: "succeeded", rows_total: total, created: total, failed_rows: 0 });
    expect((await sql<{ n: number }>(midKeys, [t.orgId]))[0]!.n).toBe(total);
    // One created event per asset: the interrupted run left none behind.
    expect(
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${OUTBOX_EVENTS} WHERE e->>'entity' = 'asset' AND e->>'verb' = 'created' AND e->'data'->>'external_key' LIKE 'MID-%'`))[0]!.n,
    ).toBe(total);
  });

  it("a chunk whose key another write took meanwhile is written row by row: only that row fails, every other row and event once", async () => {
    const { reached, release } = await holdJobsAfterFirstChunk();
    const total = BULK_CHUNK_ROWS * 2 + 10;
    const rows = Array.from({ length: total }, (_, i) => `RACE-${i},Race ${i},rfid:RACE-T${i}`);
    const res = await upload(["external_key,name,tags", ...rows].join("\n"), { on_error: "skip" });
    expect(res.statusCode).toBe(202);
    expect(await reached.promise).toBe(BULK_CHUNK_ROWS);
    // Validation has passed the whole file (rows_total known) before the key is taken: only the write can meet it.
    await eventually(async () => {
      const job = (await stack.gateway.inject({ method: "GET", url: res.headers.location as string, headers: t.auth })).json().data;
      return job.rows_total === total ? job : undefined;
    });
    const takenRow = BULK_CHUNK_ROWS + 7; // in the second chunk (rows count from 1)
    const taken = await stack.gateway.inject({ method: "POST", url: "/api/v1/assets", headers: t.auth, payload: { external_key: `RACE-${takenRow - 1}`, name: "Taken meanwhile" } });
    expect(taken.statusCode, taken.body).toBe(201);
    release.open();
    const job = await finished(res.headers.location as string);
    expect(job).toMatchObject({ status: "succeeded", rows_total: total, created: total - 1, failed_rows: 1 });
    expect(job.errors).toEqual([expect.objectContaining({ row: takenRow, field: "(row)", code: "conflict" })]);
    expect((await asset(`RACE-${takenRow - 1}`)).name).toBe("Taken meanwhile");
    // Every job row's events once: the failed chunk's went with its rollback, its rows' were written again one by one.
    const events = await sql<{ verb: string; n: number; keys: number }>(
      `SELECT e->>'verb' AS verb, count(*)::int AS n, count(DISTINCT coalesce(e->'data'->>'external_key', e->'data'->>'value'))::int AS keys
         FROM ${OUTBOX_EVENTS} WHERE o.org_id = $1 AND (e->'data'->>'external_key' LIKE 'RACE-%' OR e->'data'->>'value' LIKE 'RACE-T%')
        GROUP BY 1 ORDER BY 1`,
      [t.orgId],
    );
    expect(events).toEqual([
      { verb: "attached", n: total - 1, keys: total - 1 },
      { verb: "created", n: total, keys: total }, // the API's create of the taken key, and each job row's
    ]);
    await stack.stopService("catalog");
    await stack.startService("catalog");
  });
});

describe("a catalog SIGKILLed mid-job", () => {
  it("leaves nothing of the job; once the lease runs out a restarted catalog takes it over and runs it once", { timeout: 180_000 }, async () => {
    await stack.stopService("catalog");
    const victim = await spawnService("catalog", { DATABASE_URL: stack.db.url, NATS_URL: stack.nats.url });
    try {
      await waitForReadiness(victim, 200);
      // Several chunks, more than DEFER_INDEXES_AFTER_ROWS: the job defers the trigram indexes too.
      const total = BULK_CHUNK_ROWS * 5;
      const rows = Array.from({ length: total }, (_, i) => `KILL-${i},Killed job ${i},rfid:KILL-T${i}`);
      const res = await upload(["external_key,name,tags", ...rows].join("\n"));
      expect(res.statusCode, res.body).toBe(202);
      const jobId = res.json().data.id;
      const jobRow = async () =>
        (await sql<{ status: string; rows_total: number | null; rows_done: number; written: boolean }>(
          `SELECT status, rows_total, rows_done, written_at IS NOT NULL AS written FROM catalog.jobs WHERE id = $1`,
          [jobId],
        ))[0]!;
      // Validated (rows_total known) and writing (rows read again, not yet committed): its transaction is open.
      const writing = await eventually(async () => {
        const job = await jobRow();
        return job.rows_total !== null && job.rows_done > 0 && !job.written ? job : undefined;
      }, 90_000, 20);
      expect(writing.status).toBe("running");
      victim.child.kill("SIGKILL");
      expect((await victim.exit).signal).toBe("SIGKILL");

      const killKeys = `SELECT count(*)::int AS n FROM catalog.assets WHERE org_id = $1 AND external_key LIKE 'KILL-%'`;
      // Nothing of the job: no asset, no tag, no event; the job still `running` under the dead worker's lease.
      expect((await sql<{ n: number }>(killKeys, [t.orgId]))[0]!.n).toBe(0);
      expect((await sql<{ n: number }>(`SELECT count(*)::int AS n FROM catalog.tags WHERE org_id = $1 AND value LIKE 'KILL-T%'`, [t.orgId]))[0]!.n).toBe(0);
      expect((await sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${OUTBOX_EVENTS} WHERE e->'data'->>'external_key' LIKE 'KILL-%'`))[0]!.n).toBe(0);
      expect(await jobRow()).toMatchObject({ status: "running", written: false });

      // A new catalog takes the job over once its lease has run out (JOB_LEASE_MS) and runs it from the start.
      await stack.startService("catalog");
      const job = await finished(res.headers.location as string, t.auth, JOB_LEASE_MS * 4);
      expect(job).toMatchObject({ status: "succeeded", rows_total: total, created: total, failed_rows: 0 });
      expect((await sql<{ n: number }>(killKeys, [t.orgId]))[0]!.n).toBe(total);
      // Each asset's events once: the killed run left none behind.
      const events = await sql<{ verb: string; n: number }>(
        `SELECT e->>'verb' AS verb, count(*)::int AS n FROM ${OUTBOX_EVENTS}
          WHERE e->'data'->>'external_key' LIKE 'KILL-%' OR e->'data'->>'value' LIKE 'KILL-T%' GROUP BY 1 ORDER BY 1`,
      );
      expect(events).toEqual([
        { verb: "attached", n: total },
        { verb: "created", n: total },
      ]);
      // The trigram indexes the killed run deferred are back to their small pending list.
      const deferred = await sql<{ relname: string }>(
        `SELECT relname FROM pg_class WHERE oid = ANY($1::regclass[]) AND NOT coalesce(reloptions, '{}') @> $2::text[]`,
        [[...BULK_TRIGRAM_INDEXES], TRIGRAM_INDEX_OPTIONS],
      );
      expect(deferred).toEqual([]);
    } finally {
      victim.kill();
      if (!stack.services.catalog) await stack.startService("catalog");
    }
  });
});

describe("downstream", () => {
  it("a succeeded job's events are all published, analyzed tables, and the report shows the import with read-your-writes", async () => {
    const location = (await stack.gateway.inject({ method: "POST", url: "/api/v1/locations", headers: t.auth, payload: { name: "Downstream dock", external_key: "DS-DOCK" } })).json().data;
    const rows = Array.from({ length: 1500 }, (_, i) => `DS-${i},Downstream ${i},rfid:DS-T${i}`);
    const job = await run(["external_key,name,tags", ...rows].join("\n"));
    expect(job).toMatchObject({ status: "succeeded", created: 1500 });
    // Succeeded means published: none of its 3,000 events (created + attached) is left in the outbox.
    const outbox = await sql<{ verb: string; total: number; unpublished: number; messages: number }>(
      `SELECT e->>'verb' AS verb, count(*)::int AS total, count(*) FILTER (WHERE o.published_at IS NULL)::int AS unpublished, count(DISTINCT o.id)::int AS messages
         FROM ${OUTBOX_EVENTS}
        WHERE o.org_id = $1 AND e->>'entity' IN ('asset', 'tag') AND (e->'data'->>'external_key' LIKE 'DS-%' OR e->'data'->>'value' LIKE 'DS-T%')
        GROUP BY 1 ORDER BY 1`,
      [t.orgId],
    );
    expect(outbox.map(({ messages: _m, ...rest }) => rest)).toEqual([
      { verb: "attached", total: 1500, unpublished: 0 },
      { verb: "created", total: 1500, unpublished: 0 },
    ]);
    // In batch messages of many events each, not one message per event.
    for (const { messages } of outbox) expect(messages).toBeLessThan(100);

    // Partners still see one event per asset change, in each asset's order: created, then its tag attached.
    const feed: Array<{ type: string; data: { id: number; external_key?: string; owner_id?: number; value?: string } }> = [];
    let cursor = "";
    for (;;) {
      const res = await stack.gateway.inject({ method: "GET", url: `/api/v1/events?type=asset.created&type=tag.attached&limit=200${cursor ? `&after=${cursor}` : ""}`, headers: t.auth });
      expect(res.statusCode, res.body).toBe(200);
      const page = res.json();
      feed.push(...page.data);
      if (page.data.length < 200) break;
      cursor = page.next_cursor;
    }
    const created = new Map<number, number>();
    const attachedAfterCreated = new Set<number>();
    feed.forEach((event, i) => {
      if (event.type === "asset.created" && event.data.external_key?.startsWith("DS-")) created.set(event.data.id, i);
      if (event.type === "tag.attached" && event.data.value?.startsWith("DS-T") && created.get(event.data.owner_id!)! < i) attachedAfterCreated.add(event.data.owner_id!);
    });
    expect(created.size).toBe(1500);
    expect(attachedAfterCreated.size).toBe(1500);
    // ANALYZE ran after the rows committed and before the job succeeded.
    const [times] = await sql<{ analyzed: boolean }>(
      `SELECT s.last_analyze BETWEEN j.written_at AND j.finished_at AS analyzed
         FROM pg_stat_user_tables s, catalog.jobs j WHERE s.schemaname = 'catalog' AND s.relname = 'assets' AND j.id = $1`,
      [job.id],
    );
    expect(times).toEqual({ analyzed: true });

    // Scanned, then made not effective by a second import: once that job succeeds, the report leaves it out at once.
    const first = await asset("DS-7");
    const { publishScan } = await import("../services/tracking/src/testing/tracking-fixtures.ts");
    await publishScan(stack.nc, t.orgId, { observed_at: "2026-11-24T10:00:00Z", location: { id: location.id }, tags: [{ tag_type: "rfid", value: "DS-T7" }] });
    const report = async () => (await stack.gateway.inject({ method: "GET", url: `/api/v1/reports/asset-locations?asset_id=${first.id}`, headers: t.auth })).json().data;
    expect(await eventually(async () => ((await report()).length === 1 ? await report() : undefined), 20_000)).toEqual([
      expect.objectContaining({ asset_id: first.id, location_id: location.id }),
    ]);
    const ended = await run("external_key,name,valid_from,valid_to\nDS-7,Downstream 7,2026-01-01T00:00:00Z,2026-02-01T00:00:00Z\n");
    expect(ended).toMatchObject({ status: "succeeded", updated: 1 });
    expect(await report()).toEqual([]);
    const listed = await stack.gateway.inject({ method: "GET", url: "/api/v1/assets?external_key=DS-7", headers: t.auth });
    expect(listed.json().data).toEqual([]);
  });
});

describe("admin CLI: assets import", () => {
  const cli = (args: string[], onLine: (line: string) => void = () => undefined) =>
    new Promise<{ code: number; lines: string[]; stderr: string }>((resolve, reject) => {
      const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: stack.db.url, NATS_URL: stack.nats.url };
      delete env.GATEWAY_DATABASE_URL;
      // Piped stdout (not a terminal): progress comes as JSON lines.
      const child = spawn("npm", ["run", "-s", "admin", "--", "assets", "import", ...args], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
      const lines: string[] = [];
      let stderr = "";
      createInterface({ input: child.stdout! }).on("line", (line) => {
        lines.push(line);
        onLine(line);
      });
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code: code ?? -1, lines, stderr }));
    });
  const csvFile = async (name: string, text: string) => {
    const dir = await mkdtemp(path.join(tmpdir(), "bulk-cli-"));
    const file = path.join(dir, name);
    await writeFile(file, text);
    return file;
  };

  it("imports a file as a job, printing JSON lines of progress and the finished job last", async () => {
    // Held after its first chunk, so the CLI is seen reporting a running job before it ends.
    const { reached, release } = await holdJobsAfterFirstChunk();
    const rows = Array.from({ length: 1500 }, (_, i) => `CLI-${i},Cli ${i},rfid:CLI-T${i}`);
    const file = await csvFile("assets.csv", ["external_key,name,tags", ...rows].join("\n"));
    let sawWriting = false;
    const result = await cli(["--org", String(t.orgId), file, "--mode", "create"], (line) => {
      const p = JSON.parse(line);
      if (!sawWriting && p.status === "running" && p.phase === "writing" && p.rows_total === 1500) {
        sawWriting = true;
        release.open();
      }
    });
    // One chunk holds the whole file: held after its last row.
    expect(await reached.promise).toBe(Math.min(BULK_CHUNK_ROWS, 1500));
    expect(result.code, result.stderr).toBe(0);
    const parsed = result.lines.map((l) => JSON.parse(l));
    const progress = parsed.slice(0, -1);
    expect(progress[0]).toMatchObject({ status: "queued", phase: "queued", rows_done: 0 });
    expect(progress).toContainEqual(expect.objectContaining({ status: "running", phase: "writing", rows_total: 1500 }));
    for (const p of progress) expect(Object.keys(p).sort()).toEqual(["eta_s", "job_id", "phase", "rows_done", "rows_per_s", "rows_total", "status"]);
    expect(parsed.at(-1)).toMatchObject({ kind: "assets.bulk", status: "succeeded", rows_total: 1500, created: 1500, updated: 0, unchanged: 0, failed_rows: 0, errors: [] });
    expect(await asset("CLI-1499")).toMatchObject({ name: "Cli 1499" });
    await stack.stopService("catalog");
    await stack.startService("catalog");
  });

  it("exits 1 when the job fails, 2 on a bad command line, and says why", async () => {
    const file = await csvFile("bad.csv", "external_key,name\nCLI-BAD-1,Good\nCLI-BAD-2,\n");
    const failed = await cli(["--org", String(t.orgId), file]);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.lines.at(-1)!)).toMatchObject({ status: "failed", failed_rows: 1, errors: [expect.objectContaining({ row: 2, field: "name" })] });
    expect(failed.stderr).toMatch(/job \d+ failed/);
    expect(await asset("CLI-BAD-1")).toBeUndefined();
    const header = await cli(["--org", String(t.orgId), await csvFile("header.csv", "name,colour\nx,red\n")]);
    expect(header.code).toBe(1);
    expect(header.stderr).toMatch(/colour/);
    const usage = await cli(["--org", String(t.orgId), file, "--mode", "merge"]);
    expect(usage.code).toBe(2);
    expect(usage.lines).toEqual([]);
    const noOrg = await cli(["--org", "999999", file]);
    expect(noOrg.code).toBe(2);
    expect(noOrg.stderr).toMatch(/organization 999999 does not exist/);
  });
});
