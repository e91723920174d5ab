/**
 * Tag resolution with memory against a real replica: answers come from
 * memory only while they are still what the replica says. A catalog write to
 * the organization's assets or tags (through the replica's own apply) and
 * validity passing (on the database's clock) both make it ask again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDatabase } from "@whereabouts/shared/testing";
import { createMigratedDatabase } from "../../../../scripts/migrated-test-database.ts";
import { createTrackingClient, inTransaction, query, type TrackingClient } from "../db/tracking-db.ts";
import { applyReplicaChanges, knownOrgs, type ReplicaChanges, type TagRef, type TagRow } from "./replica-store.ts";
import { createTagResolver, type TagResolver } from "./tag-resolver.ts";

let database: TestDatabase;
let db: TrackingClient;
let version = 0;
let streamSeq = 0;

beforeAll(async () => {
  database = await createMigratedDatabase("tracking_tag_resolver");
  db = createTrackingClient(database.url, 2);
}, 60_000);

afterAll(async () => {
  await db?.$disconnect();
  await database?.drop();
});

const EPOCH = "2020-01-01T00:00:00.000000Z";

function tag(orgId: number, id: number, value: string, ownerId: number, extra: Partial<TagRow> = {}): TagRow {
  return { org_id: orgId, id, tag_type: "rfid", value, owner_type: "asset", owner_id: ownerId, is_active: true, valid_from: EPOCH, valid_to: null, deleted_at: null, version: ++version, ...extra };
}

/** A catalog batch, applied as the replica applies one. */
async function apply(orgId: number, change: Partial<ReplicaChanges>): Promise<void> {
  const changes: ReplicaChanges = { orgIds: [orgId], scanPoints: [], settings: [], locations: [], assets: [], tags: [], embeddedTags: [], streamSeq: ++streamSeq, ...change };
  await inTransaction(db, (tx) => applyReplicaChanges(tx, changes));
}

const assets = (orgId: number, ...ids: number[]) => ids.map((id) => ({ org_id: orgId, id, deleted_at: null, version: ++version }));
const ref = (orgId: number, value: string): TagRef => ({ orgId, tagType: "rfid", value });

/** As a scan batch resolves: the organizations (after the catch-up), then the tags. */
async function resolve(resolver: TagResolver, refs: TagRef[]): Promise<Array<number | null>> {
  const orgs = await knownOrgs(db, [...new Set(refs.map((r) => r.orgId))]);
  return resolver.resolve(db, refs, orgs);
}

/** The database's clock, `ms` from now, as the replica stores instants. */
async function dbTimeIn(ms: number): Promise<string> {
  const [row] = await query<{ at: string }>(db, `SELECT to_char((now() + $1 * interval '1 ms') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`, [ms]);
  return row!.at;
}

/** Resolves until the answer is `expected` (validity passing takes real time); the answers on the way. */
async function resolveUntil(resolver: TagResolver, r: TagRef, expected: number | null, timeoutMs = 10_000): Promise<Array<number | null>> {
  const seen: Array<number | null> = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [answer] = await resolve(resolver, [r]);
    seen.push(answer!);
    if (answer === expected) return seen;
    if (Date.now() > deadline) throw new Error(`still ${String(answer)} after ${timeoutMs} ms, expected ${String(expected)}`);
  }
}

describe("tag resolution with memory", () => {
  it("answers again from memory, and asks again after a catalog write to the organization", async () => {
    await apply(1, { assets: assets(1, 10, 11), tags: [tag(1, 100, "A", 10), tag(1, 101, "B", 11)] });
    const resolver = createTagResolver();
    expect(await resolve(resolver, [ref(1, "A"), ref(1, "B"), ref(1, "none")])).toEqual([10, 11, null]);
    expect(resolver.lookups()).toBe(3);
    expect(await resolve(resolver, [ref(1, "B"), ref(1, "A"), ref(1, "none")])).toEqual([11, 10, null]);
    expect(resolver.lookups()).toBe(3);

    // The tag moves to another asset; a new tag appears: both seen at once.
    await apply(1, { tags: [tag(1, 100, "A", 11, { version: ++version }), tag(1, 102, "none", 10)] });
    expect(await resolve(resolver, [ref(1, "A"), ref(1, "none")])).toEqual([11, 10]);
    // An asset deleted: its tags resolve to nothing.
    await apply(1, { assets: [{ org_id: 1, id: 11, deleted_at: EPOCH, version: ++version }] });
    expect(await resolve(resolver, [ref(1, "A"), ref(1, "B")])).toEqual([null, null]);
  });

  it("keeps another organization's answers when one organization changes", async () => {
    await apply(2, { assets: assets(2, 20), tags: [tag(2, 200, "A", 20)] });
    await apply(3, { assets: assets(3, 30), tags: [tag(3, 300, "A", 30)] });
    const resolver = createTagResolver();
    expect(await resolve(resolver, [ref(2, "A"), ref(3, "A")])).toEqual([20, 30]);
    await apply(3, { tags: [tag(3, 301, "C", 30)] });
    expect(await resolve(resolver, [ref(2, "A"), ref(3, "A")])).toEqual([20, 30]);
    // Only organization 3's tag was asked again.
    expect(resolver.lookups()).toBe(3);
  });

  it("asks again when a tag's validity ends or another's begins, on the database's clock", async () => {
    await apply(4, {
      assets: assets(4, 40, 41),
      tags: [tag(4, 400, "E", 40, { valid_to: await dbTimeIn(600) }), tag(4, 401, "S", 40), tag(4, 402, "S", 41, { valid_from: await dbTimeIn(600) })],
    });
    const resolver = createTagResolver();
    expect(await resolve(resolver, [ref(4, "E"), ref(4, "S")])).toEqual([40, 40]);
    // The expiring tag stops resolving, and the newer tag takes over its value, with no catalog write.
    const ended = await resolveUntil(resolver, ref(4, "E"), null);
    expect(ended.at(-1)).toBeNull();
    const began = await resolveUntil(resolver, ref(4, "S"), 41);
    expect(began.at(-1)).toBe(41);
    // In between it answered from memory: far fewer lookups than resolutions.
    expect(resolver.lookups()).toBeLessThan(2 + 4);
  });

  it("starts again past its memory bound", async () => {
    await apply(5, { assets: assets(5, 50), tags: [tag(5, 500, "A", 50), tag(5, 501, "B", 50), tag(5, 502, "C", 50)] });
    const resolver = createTagResolver({ memory: 2 });
    expect(await resolve(resolver, [ref(5, "A"), ref(5, "B")])).toEqual([50, 50]);
    expect(resolver.remembered()).toBe(2);
    expect(await resolve(resolver, [ref(5, "C")])).toEqual([50]);
    expect(resolver.remembered()).toBe(0);
    expect(await resolve(resolver, [ref(5, "A")])).toEqual([50]);
    expect(resolver.lookups()).toBe(4);
  });
});
