/**
 * POST /api/v1/assets writes the asset, its tags and their events in one
 * statement (insertAssetAtOnce): the rows, the view it answers and the events
 * it records must be what the transaction of separate statements
 * (insertAssetRecord: loadAsset's view, buildEvent's events) gives, key for
 * key and in emit order; it is all or nothing, and it keeps the caller's
 * deadline (catalog.within_deadline). Nothing sleeps: a held lock makes the
 * statement wait.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CatalogEvent, createPool, runWithDeadline, type TagRecord } from "@whereabouts/shared";
import type { TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { insertAssetAtOnce, loadAsset, type NewAssetWithTags } from "../services/catalog/src/assets/asset-store.ts";
import { tagRecordJson } from "../services/catalog/src/db/sql-fragments.ts";
import { packEventBatches, type EventInput } from "../services/catalog/src/events/event-outbox.ts";

let db: TestDatabase;
let pool: pg.Pool;
const TRICKY = `quote " backslash \\ tab \t newline \n é 漢字 😀 {"not":"json"}`;

beforeAll(async () => {
  db = await createMigratedDatabase("create_at_once");
  pool = createPool(db.url, 3);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const asset = (key: string, tags: NewAssetWithTags["tags"], extra: Partial<NewAssetWithTags> = {}): NewAssetWithTags => ({
  externalKey: key,
  name: TRICKY,
  description: null,
  isActive: true,
  metadata: { nested: { list: [1, 2.5, null, true], text: TRICKY }, 'key "q"': 1 },
  validFrom: undefined,
  validTo: null,
  tags,
  ...extra,
});

/** What the transaction of separate statements records for asset `id`: its view, then its tags' records by id. */
async function expectedEvents(id: number): Promise<Array<Record<string, unknown>>> {
  const { view, version } = await loadAsset(pool, 1, id);
  const inputs: EventInput[] = [{ entity: "asset", verb: "created", orgId: 1, version, data: view }];
  const tags = await pool.query<{ record: TagRecord; version: number }>(
    `SELECT ${tagRecordJson("t")} AS record, t.version FROM catalog.tags t WHERE t.owner_id = $1 ORDER BY t.id`,
    [id],
  );
  for (const tag of tags.rows) inputs.push({ entity: "tag", verb: "attached", orgId: 1, version: tag.version, data: tag.record });
  return packEventBatches(inputs).flatMap((m) => (JSON.parse(m.json) as { events: Array<Record<string, unknown>> }).events);
}

const assetCount = async (key: string) => Number((await pool.query(`SELECT count(*) AS n FROM catalog.assets WHERE external_key = $1`, [key])).rows[0].n);
const outboxCount = async () => Number((await pool.query(`SELECT count(*) AS n FROM catalog.outbox_events`)).rows[0].n);

describe("a create in one statement", () => {
  it("answers loadAsset's view and records the events the transaction would, in emit order", async () => {
    const inputs = [
      asset("AO-ALONE", [], { description: TRICKY, isActive: false, metadata: {}, validFrom: "2026-01-01T00:00:00.123456Z", validTo: "2099-01-01T00:00:00Z" }),
      asset("AO-TAGS", [
        { tagType: "rfid", value: "AO-T1", isActive: true, validFrom: undefined, validTo: null },
        // Not embedded in the view (inactive; not yet effective), yet attached: two events more.
        { tagType: "ble", value: `AO-L ${TRICKY}`, isActive: false, validFrom: undefined, validTo: null },
        { tagType: "barcode", value: "AO-B", isActive: true, validFrom: "2099-02-01T00:00:00Z", validTo: null },
        { tagType: "rfid", value: "AO-T0", isActive: true, validFrom: "2026-02-01T00:00:00Z", validTo: "2098-02-01T00:00:00Z" },
      ]),
    ];
    for (const input of inputs) {
      const before = await outboxCount();
      const created = await insertAssetAtOnce(pool, 1, input);
      const { view } = await loadAsset(pool, 1, created.id);
      expect(JSON.parse(created.view)).toEqual(view);
      expect(Object.keys(JSON.parse(created.view))).toEqual(Object.keys(view));
      expect(view.tags.map((t) => t.value)).toEqual(input.tags.length ? ["AO-T1", "AO-T0"] : []);

      const want = await expectedEvents(created.id);
      expect(created.events).toHaveLength(1 + input.tags.length);
      expect(created.events.map((e) => e.subject)).toEqual(want.map((e) => `catalog.events.1.${String(e.entity)}.${String(e.verb)}`));
      // Tags' events in the request's order (their ids follow it).
      expect(want.slice(1).map((e) => (e.data as TagRecord).value)).toEqual(input.tags.map((t) => t.value));
      created.events.forEach((pending, i) => {
        const event = JSON.parse(pending.json) as Record<string, unknown>;
        CatalogEvent.parse(event);
        const comparable = (e: Record<string, unknown>) => ({ ...e, event_id: "(id)", occurred_at: "(time)" });
        expect(comparable(event)).toEqual(comparable(want[i]!));
        expect(Object.keys(event)).toEqual(Object.keys(want[i]!));
        expect(Object.keys(event.data as object)).toEqual(Object.keys(want[i]!.data as object));
        expect(event.event_id).toBe(pending.eventId);
        expect(event.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      });
      // The outbox holds exactly these, unpublished, in emit order.
      const rows = await pool.query<{ id: string; event_id: string; payload: string; published_at: Date | null }>(
        `SELECT id::text, event_id, payload, published_at FROM catalog.outbox_events ORDER BY id OFFSET $1`,
        [before],
      );
      expect(rows.rows.map((r) => [r.id, r.event_id, r.payload, r.published_at])).toEqual(created.events.map((e) => [e.outboxId, e.eventId, e.json, null]));
    }
  });

  it("writes nothing when a tag is taken: no asset, no tag, no event", async () => {
    await insertAssetAtOnce(pool, 1, asset("AO-FIRST", [{ tagType: "rfid", value: "AO-TAKEN", isActive: true, validFrom: undefined, validTo: null }]));
    const before = await outboxCount();
    const second = asset("AO-SECOND", [
      { tagType: "rfid", value: "AO-FREE", isActive: true, validFrom: undefined, validTo: null },
      { tagType: "rfid", value: "AO-TAKEN", isActive: true, validFrom: undefined, validTo: null },
    ]);
    await expect(insertAssetAtOnce(pool, 1, second)).rejects.toMatchObject({ code: "23505" });
    expect(await assetCount("AO-SECOND")).toBe(0);
    expect(Number((await pool.query(`SELECT count(*) AS n FROM catalog.tags WHERE value = 'AO-FREE'`)).rows[0].n)).toBe(0);
    expect(await outboxCount()).toBe(before);
  });

  it("rolls back whole when it ends past its caller's deadline", async () => {
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      const before = await outboxCount();
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE catalog.tags IN SHARE MODE");
      const lockerPid = (await locker.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const deadline = Date.now() + 300;
      const input = asset("AO-LATE", [{ tagType: "rfid", value: "AO-LATE-T", isActive: true, validFrom: undefined, validTo: null }]);
      const late = runWithDeadline(deadline, () => insertAssetAtOnce(pool, 1, input)).then(
        () => undefined,
        (err: unknown) => err,
      );
      // The statement waits on the lock (its asset already inserted) until the deadline has passed...
      for (;;) {
        const { rows } = await locker.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [lockerPid]);
        if (rows[0].n >= 1 && Date.now() > deadline) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      // ...then runs to its end, where the deadline check rolls it back.
      await locker.query("COMMIT");
      const err = await late;
      expect(err).toMatchObject({ status: 503, type: "service_unavailable" });
      expect(await assetCount("AO-LATE")).toBe(0);
      expect(await outboxCount()).toBe(before);
      // Within its deadline the same create commits.
      await runWithDeadline(Date.now() + 60_000, () => insertAssetAtOnce(pool, 1, input));
      expect(await assetCount("AO-LATE")).toBe(1);
    } finally {
      await locker.end();
    }
  });
});
