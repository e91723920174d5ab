/**
 * GET /api/v1/locations/<id>/summary (EXTENSIONS.md section 5) against a real
 * stack: counts here and in the subtree after scans move assets, after asset
 * deletes, validity changes (an asset whose valid_to passes, one not yet
 * valid, an expired location) and re-parenting; validity boundaries applied
 * as they fall due, where the asset is by then; last_seen_in_subtree; the
 * request rules (path id, unknown query keys, scope) and isolation.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@whereabouts/shared/testing";
import { applyDueTransitions } from "../services/reporting/src/summary/rollup-transitions.ts";
import { createReportingDb } from "../services/reporting/src/reporting-db.ts";
import { createEventPublisher } from "../services/reporting/src/testing/event-fixtures.ts";
import { publishScan } from "../services/tracking/src/testing/tracking-fixtures.ts";
import { startStack, type Stack, apiCaller } from "./harness.ts";

let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;

beforeAll(async () => {
  stack = await startStack({ label: "location_summary" });
  t = await stack.tenant("Summary Org");
}, 120_000);
afterAll(async () => stack?.close());

const api = apiCaller(() => stack, () => t.auth);

async function location(key: string, parent?: { id: number }, auth = t.auth) {
  const res = await api("POST", "/api/v1/locations", { name: key, external_key: key, ...(parent ? { parent_id: parent.id } : {}) }, auth);
  expect(res.status).toBe(201);
  return res.body.data as { id: number };
}

async function asset(tag: string, auth = t.auth) {
  const res = await api("POST", "/api/v1/assets", { name: tag, tags: [{ tag_type: "rfid", value: tag }] }, auth);
  expect(res.status).toBe(201);
  return res.body.data as { id: number };
}

const scanAt = (orgId: number, where: { id: number }, tags: string[], observedAt: string) =>
  publishScan(stack.nc, orgId, { observed_at: observedAt, location: { id: where.id }, tags: tags.map((value) => ({ tag_type: "rfid", value })) });

const summary = async (where: { id: number }, auth = t.auth) => {
  const res = await api("GET", `/api/v1/locations/${where.id}/summary`, undefined, auth);
  expect(res.status).toBe(200);
  return res.body.data as { location_id: number; assets_here: number; assets_in_subtree: number; last_seen_in_subtree: string | null };
};
const counts = async (where: { id: number }) => {
  const s = await summary(where);
  return [s.assets_here, s.assets_in_subtree];
};
/** Scan effects are eventually visible: poll until the counts read as expected (or fail at the deadline). */
const countsBecome = (where: { id: number }, expected: number[]) =>
  eventually(async () => {
    const got = await counts(where);
    return got[0] === expected[0] && got[1] === expected[1] ? got : undefined;
  }, 20_000, 50);

describe("location summary", () => {
  it("counts here and in the subtree, follows moves, deletes, validity and re-parenting", async () => {
    const root = await location("SUM-ROOT");
    const a = await location("SUM-A", root);
    const a1 = await location("SUM-A1", a);
    const b = await location("SUM-B", root);
    expect(await summary(root)).toEqual({ location_id: root.id, assets_here: 0, assets_in_subtree: 0, last_seen_in_subtree: null });

    const [x1, x2, x3, x4] = [await asset("SUM-X1"), await asset("SUM-X2"), await asset("SUM-X3"), await asset("SUM-X4")];
    await scanAt(t.orgId, a1, ["SUM-X1", "SUM-X2"], "2026-11-20T10:00:00.000Z");
    await scanAt(t.orgId, b, ["SUM-X3"], "2026-11-20T10:05:00.000Z");
    await scanAt(t.orgId, root, ["SUM-X4"], "2026-11-20T10:01:00.000Z");
    await countsBecome(root, [1, 4]);
    expect(await counts(a)).toEqual([0, 2]);
    expect(await counts(a1)).toEqual([2, 2]);
    expect(await counts(b)).toEqual([1, 1]);
    expect((await summary(root)).last_seen_in_subtree).toBe("2026-11-20T10:05:00.000Z");
    expect((await summary(a)).last_seen_in_subtree).toBe("2026-11-20T10:00:00.000Z");

    // A move (scan): x1 leaves A's subtree for B; the root's count is unchanged, its last seen advances.
    await scanAt(t.orgId, b, ["SUM-X1"], "2026-11-20T10:10:00.000Z");
    await countsBecome(b, [2, 2]);
    expect(await counts(a)).toEqual([0, 1]);
    expect(await counts(root)).toEqual([1, 4]);
    expect((await summary(root)).last_seen_in_subtree).toBe("2026-11-20T10:10:00.000Z");
    // A repeated read at the same place only advances last seen.
    await scanAt(t.orgId, b, ["SUM-X3"], "2026-11-20T10:20:00.000Z");
    await eventually(async () => ((await summary(b)).last_seen_in_subtree === "2026-11-20T10:20:00.000Z" ? true : undefined), 20_000, 50);
    expect(await counts(b)).toEqual([2, 2]);

    // A delete is a catalog write: the next summary sees it (read-your-writes).
    expect((await api("DELETE", `/api/v1/assets/${x3.id}`)).status).toBe(204);
    expect(await counts(b)).toEqual([1, 1]);
    expect(await counts(root)).toEqual([1, 3]);
    // The newest counted asset in B is now x1 (10:10), x3's later read no longer counts.
    expect((await summary(b)).last_seen_in_subtree).toBe("2026-11-20T10:10:00.000Z");

    // Validity: x2 expires in a moment (counted until then), x4 is not yet valid.
    const soon = new Date(Date.now() + 5000).toISOString();
    expect((await api("PATCH", `/api/v1/assets/${x2.id}`, { valid_to: soon })).status).toBe(200);
    expect(await counts(a1)).toEqual([1, 1]);
    expect((await api("PATCH", `/api/v1/assets/${x4.id}`, { valid_from: "2999-01-01T00:00:00Z" })).status).toBe(200);
    expect(await counts(root)).toEqual([0, 2]);
    // No catalog write happens when valid_to passes: reporting's transitions loop applies it
    // within about its period (1 s), so poll with a deadline.
    await countsBecome(a1, [0, 0]);
    expect(await counts(root)).toEqual([0, 1]);
    expect((await summary(a)).last_seen_in_subtree).toBeNull();
    expect((await api("PATCH", `/api/v1/assets/${x2.id}`, { valid_to: null })).status).toBe(200);
    expect(await counts(a1)).toEqual([1, 1]);
    expect((await summary(a)).last_seen_in_subtree).toBe("2026-11-20T10:00:00.000Z");

    // An expired location drops its own assets from its ancestors' counts.
    expect((await api("PATCH", `/api/v1/locations/${a1.id}`, { valid_to: "2020-01-01T00:00:00Z" })).status).toBe(200);
    expect(await counts(a)).toEqual([0, 0]);
    expect(await counts(root)).toEqual([0, 1]);
    expect((await api("PATCH", `/api/v1/locations/${a1.id}`, { valid_to: null })).status).toBe(200);
    expect(await counts(root)).toEqual([0, 2]);

    // Re-parenting A (with A1) under B moves its assets into B's subtree.
    expect((await api("PATCH", `/api/v1/locations/${a.id}`, { parent_id: b.id })).status).toBe(200);
    expect(await counts(b)).toEqual([1, 2]);
    expect(await counts(root)).toEqual([0, 2]);
    expect((await api("PATCH", `/api/v1/locations/${a.id}`, { parent_id: null })).status).toBe(200);
    expect(await counts(b)).toEqual([1, 1]);
    expect(await counts(root)).toEqual([0, 1]);
    expect(await counts(a)).toEqual([0, 1]);
    expect(x1.id).toBeGreaterThan(0);
  });

  it("applies validity boundaries as they fall due, where the asset is now (a move carries them)", async () => {
    const root = await location("SUM-DUE");
    const p = await location("SUM-DUE-P", root);
    const q = await location("SUM-DUE-Q", root);
    const y = await asset("SUM-DUE-Y");
    const z = await asset("SUM-DUE-Z");
    await scanAt(t.orgId, p, ["SUM-DUE-Y", "SUM-DUE-Z"], "2026-11-22T10:00:00.000Z");
    await countsBecome(p, [2, 2]);

    // z becomes valid in a few seconds: not counted until then.
    expect((await api("PATCH", `/api/v1/assets/${z.id}`, { valid_from: new Date(Date.now() + 6000).toISOString() })).status).toBe(200);
    expect(await counts(p)).toEqual([1, 1]);
    // y expires in a moment.
    expect((await api("PATCH", `/api/v1/assets/${y.id}`, { valid_to: new Date(Date.now() + 2000).toISOString() })).status).toBe(200);

    // y moves to Q before its valid_to: its count and its pending boundary go with it.
    await scanAt(t.orgId, q, ["SUM-DUE-Y"], "2026-11-22T10:05:00.000Z");
    await eventually(async () => ((await summary(q)).last_seen_in_subtree === "2026-11-22T10:05:00.000Z" ? true : undefined), 20_000, 50);
    // Once due, the loop takes y out of Q (not P: P never goes negative) and adds z to P.
    await countsBecome(q, [0, 0]);
    await countsBecome(p, [1, 1]);
    expect(await counts(root)).toEqual([0, 1]);
    expect(await counts(q)).toEqual([0, 0]);
  });

  it("due boundaries are shared by replicas: each applied exactly once", async () => {
    const spot = await location("SUM-REPLICAS");
    await countsBecome(spot, [0, 0]);
    // 400 due +1 boundaries at one location (asset ids nobody uses), then two
    // "replicas" draining them in small batches at once, besides the service's own loop.
    const replicas = [createReportingDb(stack.db.url, 2), createReportingDb(stack.db.url, 2)];
    try {
      await replicas[0]!.$executeRawUnsafe(
        `INSERT INTO reporting.location_rollup_transitions (org_id, asset_id, at, location_id, delta)
         SELECT $1, 1000000 + g, now() - interval '1 second' - g * interval '1 microsecond', $2, 1 FROM generate_series(1, 400) g`,
        t.orgId,
        spot.id,
      );
      const drain = async (db: (typeof replicas)[number]) => {
        let applied = 0;
        for (let n = -1; n !== 0; ) {
          // A round that gave way on a lock (all three bump one counter row) is retried, as the loop does.
          n = await applyDueTransitions(db, 25).catch((err: unknown) => {
            if (/lock timeout|55P03/.test(String(err))) return -1;
            throw err;
          });
          if (n > 0) applied += n;
        }
        return applied;
      };
      const applied = await Promise.all(replicas.map(drain));
      expect(applied[0]! + applied[1]!).toBeLessThanOrEqual(400);
      await countsBecome(spot, [400, 400]);
      const [left] = await replicas[0]!.$queryRawUnsafe<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM reporting.location_rollup_transitions WHERE org_id = $1 AND location_id = $2`,
        t.orgId,
        spot.id,
      );
      expect(left!.n).toBe(0);
    } finally {
      await Promise.all(replicas.map((db) => db.$disconnect()));
    }
  });

  it("answers the request rules: path ids, unknown query keys, 404, scope", async () => {
    const spot = await location("SUM-RULES");
    expect((await api("GET", `/api/v1/locations/0/summary`)).body.error.fields[0]).toMatchObject({ field: "location_id", code: "too_small" });
    expect((await api("GET", `/api/v1/locations/2147483648/summary`)).status).toBe(400);
    expect((await api("GET", `/api/v1/locations/2147483647/summary`)).status).toBe(404);
    const unknown = await api("GET", `/api/v1/locations/${spot.id}/summary?depth=2`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.fields[0]).toMatchObject({ field: "depth", code: "unknown_field" });
    const gone = await location("SUM-GONE");
    expect((await api("DELETE", `/api/v1/locations/${gone.id}`)).status).toBe(204);
    expect((await api("GET", `/api/v1/locations/${gone.id}/summary`)).status).toBe(404);
    const { key } = await stack.createKey({ org: t.orgId, scopes: "assets:read" });
    expect((await api("GET", `/api/v1/locations/${spot.id}/summary`, undefined, { authorization: `Bearer ${key}` })).status).toBe(403);
    const { key: reader } = await stack.createKey({ org: t.orgId, scopes: "locations:read" });
    expect((await api("GET", `/api/v1/locations/${spot.id}/summary`, undefined, { authorization: `Bearer ${reader}` })).status).toBe(200);
  });

  it("counts an asset whose position reporting applied before the location's first event (a root location)", async () => {
    // The two streams have their own consumers: a scan's position can be applied
    // before the catalog event of the location it names.
    const org = await stack.tenant("Summary Order Org");
    const pub = createEventPublisher(stack.nc, org.orgId, { awaitPositions: true });
    const [locationId, assetId] = [900_001, 900_002];
    await pub.asset({ id: assetId, key: "SUM-ORDER-A" });
    // Applied (reporting's TRACKING durable acked it) before the location exists there.
    await pub.position({ assetId, locationId, observedAt: "2026-11-21T00:00:00.000Z", seq: 1 });
    await pub.location({ id: locationId, key: "SUM-ORDER-L" });
    const counted = await eventually(async () => {
      const res = await api("GET", `/api/v1/locations/${locationId}/summary`, undefined, org.auth);
      const data = res.body?.data as { assets_here?: number } | undefined;
      return res.status === 200 && data?.assets_here === 1 ? data : undefined;
    }, 20_000, 50);
    expect(counted).toMatchObject({ location_id: locationId, assets_here: 1, assets_in_subtree: 1 });
    expect(Date.parse(String((counted as { last_seen_in_subtree: string }).last_seen_in_subtree))).toBe(Date.parse("2026-11-21T00:00:00.000Z"));
  });

  it("is isolated per organization", async () => {
    const mine = await location("SUM-ISO");
    await asset("SUM-ISO-TAG");
    const other = await stack.tenant("Other Summary Org");
    const theirs = await location("SUM-ISO", undefined, other.auth);
    await asset("SUM-ISO-TAG", other.auth);
    await scanAt(other.orgId, theirs, ["SUM-ISO-TAG"], "2026-11-21T00:00:00.000Z");
    await eventually(async () => ((await summary(theirs, other.auth)).assets_here === 1 ? true : undefined), 20_000, 50);
    expect(await summary(mine)).toEqual({ location_id: mine.id, assets_here: 0, assets_in_subtree: 0, last_seen_in_subtree: null });
    expect((await api("GET", `/api/v1/locations/${theirs.id}/summary`)).status).toBe(404);
    expect((await api("GET", `/api/v1/locations/${mine.id}/summary`, undefined, other.auth)).status).toBe(404);
  });
});
