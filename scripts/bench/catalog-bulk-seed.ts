/**
 * Fast seeding for a stack the benchmark started itself: the same locations,
 * assets and tags catalog-seed.ts creates through the API (same keys, names
 * and tag values), written with three set-based INSERTs into the catalog's
 * tables, then announced to the other services with the CatalogEvents the
 * catalog would have published (validated by the shared zod contract), so
 * tracking and reporting build their replicas exactly as after API writes.
 *
 * Why not the API: today's create path does about 50-150 creates/s on this
 * 2-core machine, minutes for 20,000 assets. Creates are measured by the
 * `create-asset` case instead. `--api-seed` uses the API path anyway.
 */
import type { JetStreamClient } from "@nats-io/jetstream";
import { CatalogEvent, catalogEventSubject, encodeJson } from "@whereabouts/shared";
import type { CatalogSeed } from "./catalog-seed.ts";
import { publishAll } from "./scan-publisher.ts";
import { connectSql } from "./sql-client.ts";

interface InsertedRow {
  id: number;
  external_key: string;
  name: string;
}

interface InsertedTag {
  id: number;
  owner_id: number;
  value: string;
}

export async function bulkSeedCatalog(o: {
  databaseUrl: string;
  js: JetStreamClient;
  orgId: number;
  runId: string;
  locations: number;
  assets: number;
  zephyrEvery: number;
  log: (m: string) => void;
}): Promise<CatalogSeed> {
  const started = Date.now();
  // One instant for every row, at the catalog's millisecond precision.
  const at = new Date(Math.floor(Date.now()));
  const atWire = at.toISOString();
  const client = await connectSql(o.databaseUrl);
  let locations: InsertedRow[];
  let assets: InsertedRow[];
  let tags: InsertedTag[];
  try {
    await client.query("BEGIN");
    ({ rows: locations } = await client.query<InsertedRow>(
      `INSERT INTO catalog.locations (org_id, external_key, name, valid_from, created_at, updated_at)
       SELECT $1, 'BL-' || $2::text || '-' || lpad(g::text, 4, '0'), 'Bench location ' || g, $3::timestamptz, $3::timestamptz, $3::timestamptz
         FROM generate_series(1, $4::int) g ORDER BY g
       RETURNING id, external_key, name`,
      [o.orgId, o.runId, at, o.locations],
    ));
    ({ rows: assets } = await client.query<InsertedRow>(
      `INSERT INTO catalog.assets (org_id, external_key, name, valid_from, created_at, updated_at)
       SELECT $1, 'BA-' || $2::text || '-' || lpad(g::text, 6, '0'),
              'Bench asset ' || g || CASE WHEN g % $5::int = 0 THEN ' zephyr crate' ELSE ' pallet' END,
              $3::timestamptz, $3::timestamptz, $3::timestamptz
         FROM generate_series(1, $4::int) g ORDER BY g
       RETURNING id, external_key, name`,
      [o.orgId, o.runId, at, o.assets, o.zephyrEvery],
    ));
    ({ rows: tags } = await client.query<InsertedTag>(
      `INSERT INTO catalog.tags (org_id, owner_type, owner_id, tag_type, value, valid_from, created_at, updated_at)
       SELECT a.org_id, 'asset', a.id, 'rfid', 'BENCH-' || $2::text || '-' || right(a.external_key, 6),
              $3::timestamptz, $3::timestamptz, $3::timestamptz
         FROM catalog.assets a
        WHERE a.org_id = $1 AND a.external_key LIKE 'BA-' || $2::text || '-%' AND a.deleted_at IS NULL
        ORDER BY a.id
       RETURNING id, owner_id, value`,
      [o.orgId, o.runId, at],
    ));
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    await client.end();
  }
  const byKey = (a: InsertedRow, b: InsertedRow) => (a.external_key < b.external_key ? -1 : 1);
  locations.sort(byKey);
  assets.sort(byKey);
  o.log(`inserted ${locations.length} locations, ${assets.length} assets, ${tags.length} tags in ${Date.now() - started} ms`);

  let n = 0;
  const event = (entity: "asset" | "location" | "tag", id: number, data: unknown) =>
    CatalogEvent.parse({
      version: 1,
      event_id: `bench-seed-${o.runId}-${++n}`,
      org_id: o.orgId,
      entity,
      entity_id: id,
      entity_version: 1,
      verb: "created",
      occurred_at: atWire,
      data,
    });
  const common = { description: null, is_active: true, valid_from: atWire, valid_to: null, created_at: atWire, updated_at: atWire, deleted_at: null, tags: [] };
  const events = [
    ...locations.map((l) =>
      event("location", l.id, { ...common, id: l.id, external_key: l.external_key, name: l.name, parent_id: null, parent_external_key: null, is_zone: false, max_dwell_s: null }),
    ),
    ...assets.map((a) =>
      event("asset", a.id, { ...common, id: a.id, external_key: a.external_key, name: a.name, metadata: {}, location_id: null, location_external_key: null }),
    ),
    ...tags.map((t) =>
      event("tag", t.id, {
        id: t.id,
        tag_type: "rfid",
        value: t.value,
        is_active: true,
        valid_from: atWire,
        valid_to: null,
        created_at: atWire,
        updated_at: atWire,
        owner_type: "asset",
        owner_id: t.owner_id,
        deleted_at: null,
      }),
    ),
  ];
  await publishAll(
    o.js,
    events.map((e) => ({ subject: catalogEventSubject(e.org_id, e.entity, e.verb), data: encodeJson(e), msgID: e.event_id })),
  );
  const seconds = (Date.now() - started) / 1000;
  o.log(`published ${events.length} catalog events; bulk seed took ${seconds.toFixed(1)} s`);

  const tagOf = new Map(tags.map((t) => [t.owner_id, t.value]));
  return {
    runId: o.runId,
    locations: locations.map((l) => ({ id: l.id, externalKey: l.external_key })),
    assets: assets.map((a) => ({ id: a.id, tagValue: tagOf.get(a.id)! })),
    zephyrAssets: assets.filter((a) => a.name.includes("zephyr")).length,
    seconds,
  };
}
