/**
 * The catalog outbox's retention (services/catalog/src/events/outbox-retention.ts):
 * published rows older than the retention go; rows published recently stay, and
 * rows not published yet stay whatever their age (the relay still owes them).
 */
import type pg from "pg";
import { createLogger, createPool } from "@whereabouts/shared";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { eventually, type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../scripts/migrated-test-database.ts";
import { purgePublishedOutbox, startOutboxRetention } from "../services/catalog/src/events/outbox-retention.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createMigratedDatabase("catalog_outbox_retention");
  pool = createPool(db.url, 2);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** `n` outbox rows named `<label>-<i>`, created and published `agoS` seconds ago (null: not published). */
async function rows(label: string, n: number, agoS: number, published: boolean): Promise<void> {
  await pool.query(
    `INSERT INTO catalog.outbox_events (event_id, org_id, subject, payload, created_at, published_at)
     SELECT $1 || '-' || g, 1, 'catalog.events.1.asset.created', '{}', now() - make_interval(secs => $2),
            CASE WHEN $3 THEN now() - make_interval(secs => $2) END
       FROM generate_series(1, $4) g`,
    [label, agoS, published, n],
  );
}

const left = async () =>
  (await pool.query<{ label: string; n: number }>(
    `SELECT split_part(event_id, '-', 1) AS label, count(*)::int AS n FROM catalog.outbox_events GROUP BY 1 ORDER BY 1`,
  )).rows;

beforeEach(async () => {
  await pool.query("DELETE FROM catalog.outbox_events");
});

describe("outbox retention", () => {
  it("deletes rows published before the retention, in batches, and keeps recent and unpublished ones", async () => {
    await rows("old", 23, 3 * 86400, true);
    await rows("stuck", 2, 2 * 86400, false); // older than the retention, never published
    await rows("older", 5, 2 * 86400, true); // after the stuck rows: a batch of old rows behind them goes too
    await rows("recent", 4, 3600, true);
    await rows("pending", 3, 10, false);
    // Batches of 4: several statements, each deleting what it may among the oldest rows.
    expect(await purgePublishedOutbox(pool, 86400, 4)).toBe(28);
    expect(await left()).toEqual([
      { label: "pending", n: 3 },
      { label: "recent", n: 4 },
      { label: "stuck", n: 2 },
    ]);
    expect(await purgePublishedOutbox(pool, 86400, 4)).toBe(0);
  });

  it("ends a round at the first batch with nothing to delete: rows after it wait for the next round", async () => {
    await rows("recent", 5, 3600, true);
    await rows("old", 3, 3 * 86400, true); // newer ids than the recent rows: not reached this round
    expect(await purgePublishedOutbox(pool, 86400, 5)).toBe(0);
    expect(await left()).toEqual([
      { label: "old", n: 3 },
      { label: "recent", n: 5 },
    ]);
  });

  it("runs as a worker", async () => {
    await rows("old", 3, 3 * 86400, true);
    await rows("recent", 2, 60, true);
    const worker = startOutboxRetention({ db: pool, logger: createLogger("outbox-test", "silent"), firstAfterMs: 0 });
    try {
      await eventually(async () => ((await left()).length === 1 ? true : undefined), 10_000, 50);
      expect(await left()).toEqual([{ label: "recent", n: 2 }]);
    } finally {
      await worker.stop();
    }
  });
});
