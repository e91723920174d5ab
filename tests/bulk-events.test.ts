/**
 * A bulk chunk's events are written by Postgres, in the statement that
 * inserts the rows (recordEventBatchesSql): they must be the events the
 * catalog itself would write for those rows (buildEvent, packEventBatches),
 * key for key and in the same order, packed into messages of the same bound.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CATALOG_BATCH_MAX_BYTES, CatalogEvent, CatalogEventBatch, createPool, type TagRecord } from "@whereabouts/shared";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { assetInsertBatch, insertAssetsWithTags, loadAsset, type NewAssetWithTags } from "../services/catalog/src/assets/asset-store.ts";
import { tagRecordJson } from "../services/catalog/src/db/sql-fragments.ts";
import { packEventBatches, type EventInput } from "../services/catalog/src/events/event-outbox.ts";

let db: TestDatabase;
let pool: pg.Pool;
const TRICKY = `quote " backslash \\ tab \t newline \n é 漢字 😀 {"not":"json"}`;

beforeAll(async () => {
  db = await createMigratedDatabase("bulk_events");
  pool = createPool(db.url, 2);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** `n` new assets: every other one with two tags (one inactive, with validity), metadata and text that need escaping. */
function chunk(n: number): NewAssetWithTags[] {
  return Array.from({ length: n }, (_, i) => ({
    externalKey: `BE-${i}`,
    name: i % 3 ? `Asset ${i}` : TRICKY,
    description: i % 2 ? null : TRICKY,
    isActive: i % 5 !== 0,
    // Two rows' events are larger than half a message: each goes in a message of its own.
    metadata: i === 7 || i === 300 ? { big: "x".repeat(CATALOG_BATCH_MAX_BYTES * 0.6) } : i % 2 ? {} : { nested: { list: [1, 2.5, null, true], text: TRICKY }, "key \"q\"": i },
    validFrom: i % 4 ? undefined : "2026-01-01T00:00:00.123456Z",
    validTo: i % 4 ? null : "2099-01-01T00:00:00Z",
    tags:
      i % 2
        ? []
        : [
            { tagType: "rfid", value: `BE-T${i}`, isActive: true, validFrom: undefined, validTo: null },
            { tagType: "ble", value: `BE-L${i} ${TRICKY}`, isActive: false, validFrom: "2026-02-01T00:00:00Z", validTo: "2027-02-01T00:00:00Z" },
          ],
  }));
}

describe("a bulk chunk's events", () => {
  it("are the events the catalog writes for the same rows, in the same order and key order, packed to the same bound", async () => {
    const client = await pool.connect();
    const rows = 600;
    try {
      await client.query("BEGIN");
      await insertAssetsWithTags(client, assetInsertBatch(1, chunk(rows)));
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    const messages = (await pool.query<{ event_id: string; subject: string; payload: string }>(`SELECT event_id, subject, payload FROM catalog.outbox_events ORDER BY id`)).rows;
    expect(messages.length).toBeGreaterThan(3); // the bound is reached: several messages
    const written: Array<Record<string, unknown>> = [];
    let alone = 0;
    for (const m of messages) {
      expect(m.subject).toBe("catalog.events.1.batch.events");
      const batch = CatalogEventBatch.parse(JSON.parse(m.payload));
      const texts = (JSON.parse(m.payload) as { events: unknown[] }).events.map((e) => JSON.stringify(e));
      // Messages hold the events that start within the bound: all but the last fit in it, and an event
      // over half the bound travels alone (a message never reaches 1.5 times the bound with another).
      expect(texts.slice(0, -1).reduce((sum, t) => sum + Buffer.byteLength(t) + 1, 0)).toBeLessThanOrEqual(CATALOG_BATCH_MAX_BYTES);
      if (texts.some((t) => Buffer.byteLength(t) * 2 > CATALOG_BATCH_MAX_BYTES)) {
        expect(texts).toHaveLength(1);
        alone++;
      } else expect(Buffer.byteLength(m.payload)).toBeLessThan(CATALOG_BATCH_MAX_BYTES * 1.5);
      for (const e of batch.events) {
        CatalogEvent.parse(e); // a valid event; kept as written (its key order)
        written.push(e as Record<string, unknown>);
      }
    }
    expect(alone).toBe(2);
    expect(new Set(messages.map((m) => m.event_id)).size).toBe(messages.length);
    expect(new Set(written.map((e) => e.event_id)).size).toBe(written.length);

    // What the catalog would write for these rows: each asset's view, then its tags' records by id.
    const ids = (await pool.query<{ id: number }>(`SELECT id FROM catalog.assets ORDER BY id`)).rows.map((r) => r.id);
    expect(ids).toHaveLength(rows);
    const inputs: EventInput[] = [];
    for (const id of ids) {
      const { view, version } = await loadAsset(pool, 1, id);
      expect(view.external_key).toBe(`BE-${inputs.filter((e) => e.entity === "asset").length}`); // input order
      inputs.push({ entity: "asset", verb: "created", orgId: 1, version, data: view });
      const tags = await pool.query<{ record: TagRecord; version: number }>(
        `SELECT ${tagRecordJson("t")} AS record, t.version FROM catalog.tags t WHERE t.owner_id = $1 ORDER BY t.id`,
        [id],
      );
      for (const tag of tags.rows) inputs.push({ entity: "tag", verb: "attached", orgId: 1, version: tag.version, data: tag.record });
    }
    const expected = packEventBatches(inputs).flatMap((m) => (JSON.parse(m.json) as { events: Array<Record<string, unknown>> }).events);
    expect(written).toHaveLength(expected.length);
    written.forEach((event, i) => {
      const want = expected[i]!;
      const comparable = (e: Record<string, unknown>) => ({ ...e, event_id: "(id)", occurred_at: "(time)" });
      expect(comparable(event)).toEqual(comparable(want));
      expect(Object.keys(event)).toEqual(Object.keys(want));
      expect(Object.keys(event.data as object)).toEqual(Object.keys(want.data as object));
      expect(event.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    });
  });
});
