/**
 * Zones and alerts (EXTENSIONS.md section 5) against a real stack: the
 * location fields `is_zone` / `max_dwell_s` (validation, defaults, PATCH,
 * list filter); debounced zone.entered / zone.exited (a short visit below the
 * debounce and a move between two children of one zone are no event; nested
 * zones judged each on its own); asset.dwell_exceeded and asset.missing
 * firing once per episode and surviving restarts of reporting (which computes
 * them); isolation between organizations. Scans go in through the SCANS
 * stream; events are read from the feed, polled with a deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool, scanSubject } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
type Tenant = Awaited<ReturnType<Stack["tenant"]>>;
let zonesOrg: Tenant;
let alertsOrg: Tenant;

beforeAll(async () => {
  stack = await startStack({ label: "zones_alerts", events: { alertPollMs: 100 } });
  zonesOrg = await stack.tenant("Zones Org");
  alertsOrg = await stack.tenant("Alerts Org");
}, 120_000);
afterAll(async () => stack?.close());

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type FeedEvent = { id: string; type: string; occurred_at: string; org_id: number; data: Body };

async function api(t: Tenant, method: string, url: string, body?: unknown) {
  const res = await stack.gateway.inject({
    method: method as "GET",
    url,
    headers: { ...t.auth, ...(body === undefined ? {} : { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" }) },
    ...(body === undefined ? {} : { payload: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: (res.body ? res.json() : undefined) as Body };
}

const fieldsOf = (res: { body: Body }) => (res.body.error.fields as Body[]).map((f) => [f.field, f.code]);

/** The organization's whole feed of these types (alerts only by default). */
async function events(t: Tenant, types = ["zone.entered", "zone.exited", "asset.dwell_exceeded", "asset.missing"]): Promise<FeedEvent[]> {
  const all: FeedEvent[] = [];
  let cursor = "";
  for (;;) {
    const res = await api(t, "GET", `/api/v1/events?limit=200${cursor ? `&after=${cursor}` : ""}${types.map((x) => `&type=${x}`).join("")}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    all.push(...(res.body.data as FeedEvent[]));
    cursor = res.body.next_cursor as string;
    if (res.body.data.length < 200) return all;
  }
}

/** Polls the feed until `pick` finds what it wants. */
const waitForEvents = (t: Tenant, pick: (e: FeedEvent[]) => boolean, timeoutMs = 30_000) =>
  eventually(async () => {
    const got = await events(t);
    return pick(got) ? got : undefined;
  }, timeoutMs, 100);

async function location(t: Tenant, body: Body): Promise<Body> {
  const res = await api(t, "POST", "/api/v1/locations", body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Body;
}

async function asset(t: Tenant, key: string, tag: string): Promise<number> {
  const res = await api(t, "POST", "/api/v1/assets", { name: key, external_key: key, tags: [{ tag_type: "rfid", value: tag }] });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id as number;
}

/** Observation instants that only move forward (a scan older than the asset's position changes nothing). */
let lastObserved = 0;
function observedAt(offsetMs = 0): string {
  lastObserved = Math.max(Date.now() + offsetMs, lastObserved + 1);
  return new Date(lastObserved).toISOString();
}

/** Publishes one scan and waits until reporting shows it (the report's asset_last_seen). */
async function scan(t: Tenant, assetId: number, locationKey: string, tag: string, at: string): Promise<void> {
  await stack.nc.publish(scanSubject(t.orgId, "gate-1"), JSON.stringify({ observed_at: at, location: { external_key: locationKey }, tags: [{ tag_type: "rfid", value: tag }] }));
  await eventually(async () => {
    const res = await api(t, "GET", `/api/v1/reports/asset-locations?asset_id=${assetId}`);
    return res.body.data?.[0]?.asset_last_seen === at ? true : undefined;
  }, 20_000, 50);
}

async function restartReporting(): Promise<void> {
  await stack.stopService("reporting");
  await stack.startService("reporting");
}

/** What reporting holds for an asset's pending alerts (nothing pending: both null). */
async function pendingAlerts(orgId: number, assetId: number): Promise<{ dwell_due_at: Date | null; missing_due_at: Date | null }> {
  const pool = createPool(stack.db.url, 1);
  try {
    const { rows } = await pool.query(
      `SELECT dwell_due_at, missing_due_at FROM reporting.alert_assets WHERE org_id = $1 AND asset_id = $2`,
      [orgId, assetId],
    );
    return rows[0] as { dwell_due_at: Date | null; missing_due_at: Date | null };
  } finally {
    await pool.end();
  }
}

describe("location fields is_zone and max_dwell_s", () => {
  it("default to false and null, are set on create and PATCH, and filter the list", async () => {
    const plain = await location(zonesOrg, { name: "Plain", external_key: "F-PLAIN" });
    expect(plain).toMatchObject({ is_zone: false, max_dwell_s: null });
    const zone = await location(zonesOrg, { name: "Zone", external_key: "F-ZONE", is_zone: true, max_dwell_s: 0 });
    expect(zone).toMatchObject({ is_zone: true, max_dwell_s: 0 });
    const patched = await api(zonesOrg, "PATCH", `/api/v1/locations/${plain.id}`, { max_dwell_s: 3600, is_zone: false });
    expect(patched.body.data).toMatchObject({ is_zone: false, max_dwell_s: 3600 });
    expect(patched.body.data.updated_at > plain.updated_at).toBe(true);
    const cleared = await api(zonesOrg, "PATCH", `/api/v1/locations/${plain.id}`, { max_dwell_s: null });
    expect(cleared.body.data.max_dwell_s).toBeNull();
    // A no-op patch of the new fields leaves the row as it was.
    const same = await api(zonesOrg, "PATCH", `/api/v1/locations/${zone.id}`, { is_zone: true, max_dwell_s: 0 });
    expect(same.body.data.updated_at).toBe(zone.updated_at);

    const zones = await api(zonesOrg, "GET", "/api/v1/locations?is_zone=true&external_key=F-ZONE&external_key=F-PLAIN");
    expect(zones.body.data.map((l: Body) => l.external_key)).toEqual(["F-ZONE"]);
    const others = await api(zonesOrg, "GET", "/api/v1/locations?is_zone=false&external_key=F-ZONE&external_key=F-PLAIN");
    expect(others.body.data.map((l: Body) => l.external_key)).toEqual(["F-PLAIN"]);
    expect(fieldsOf(await api(zonesOrg, "GET", "/api/v1/locations?is_zone=maybe"))).toEqual([["is_zone", "invalid_value"]]);

    // The location events partners read carry them too.
    const feed = await api(zonesOrg, "GET", "/api/v1/events?type=location.created&limit=200");
    expect(feed.body.data.find((e: FeedEvent) => e.data.id === zone.id)?.data).toMatchObject({ is_zone: true, max_dwell_s: 0 });
  });

  it("refuses wrong types, negatives, fractions, too large values and null where not nullable", async () => {
    const negative = await api(zonesOrg, "POST", "/api/v1/locations", { name: "x", max_dwell_s: -1 });
    expect(negative.status).toBe(400);
    expect(fieldsOf(negative)).toEqual([["max_dwell_s", "too_small"]]);
    const huge = await api(zonesOrg, "POST", "/api/v1/locations", { name: "x", max_dwell_s: 2147483648 });
    expect(fieldsOf(huge)).toEqual([["max_dwell_s", "too_large"]]);
    const fraction = await api(zonesOrg, "POST", "/api/v1/locations", { name: "x", max_dwell_s: 1.5 });
    // As for the org settings' seconds: a fraction is not the integer the field is, named in the detail.
    expect(fraction.status).toBe(400);
    expect(fraction.body.error.type).toBe("bad_request");
    expect(fraction.body.error.detail).toContain("max_dwell_s");
    const nullZone = await api(zonesOrg, "POST", "/api/v1/locations", { name: "x", is_zone: null });
    expect(fieldsOf(nullZone)).toEqual([["is_zone", "invalid_value"]]);
    for (const body of [{ name: "x", is_zone: "yes" }, { name: "x", max_dwell_s: "60" }, { name: "x", is_zone: 1 }]) {
      const res = await api(zonesOrg, "POST", "/api/v1/locations", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.type).toBe("bad_request");
      expect(res.body.error.detail).toContain(Object.keys(body)[1]);
    }

    const loc = await location(zonesOrg, { name: "Target", external_key: "F-TARGET" });
    const patchNegative = await api(zonesOrg, "PATCH", `/api/v1/locations/${loc.id}`, { max_dwell_s: -5, is_zone: null });
    expect(fieldsOf(patchNegative).sort()).toEqual([["is_zone", "invalid_value"], ["max_dwell_s", "too_small"]]);
    expect((await api(zonesOrg, "PATCH", `/api/v1/locations/${loc.id}`, { is_zone: "true" })).body.error.type).toBe("bad_request");
    // Nothing half-written: the record is as created.
    expect((await api(zonesOrg, "GET", `/api/v1/locations/${loc.id}`)).body.data).toMatchObject({ is_zone: false, max_dwell_s: null, updated_at: loc.updated_at });
  });
});

describe("zone.entered and zone.exited", () => {
  it("fire after zone_min_stay_s, not for a short visit nor for a move between two children; nested zones each on their own", async () => {
    const t = zonesOrg;
    expect((await api(t, "PATCH", "/api/v1/orgs/me/settings", { zone_min_stay_s: 1 })).status).toBe(200);
    await location(t, { name: "Yard", external_key: "Z-YARD" });
    const hall = await location(t, { name: "Hall", external_key: "Z-HALL", is_zone: true });
    // Bay A is a zone of its own inside the hall; bay B is not.
    const bayA = await location(t, { name: "Bay A", external_key: "Z-BAY-A", parent_id: hall.id, is_zone: true });
    const bayB = await location(t, { name: "Bay B", external_key: "Z-BAY-B", parent_id: hall.id });
    const id = await asset(t, "Z-PALLET", "Z-TAG");
    // Reading the feed waits for reporting to hold these catalog writes (read-your-writes).
    await events(t);

    // This asset's own clock, far enough ahead that the wall clock never reaches a due time of the
    // short visit (however slow the machine): every crossing here is confirmed by a later scan instead.
    let last = 0;
    const at = (offsetMs: number) => {
      last = Math.max(Date.now() + offsetMs, last + 1);
      return new Date(last).toISOString();
    };
    const after = (instant: string, ms: number) => at(Date.parse(instant) + ms - Date.now());
    await scan(t, id, "Z-YARD", "Z-TAG", at(0));
    // A short visit: in the hall for 0.4 s of observed time, both scans judged long before their due time.
    const visitIn = at(60_000);
    await scan(t, id, "Z-BAY-B", "Z-TAG", visitIn);
    await scan(t, id, "Z-YARD", "Z-TAG", after(visitIn, 400));

    // A real stay: enters both zones at the same instant; a scan there 1.5 s later confirms it.
    const enteredAt = after(visitIn, 2_000);
    await scan(t, id, "Z-BAY-A", "Z-TAG", enteredAt);
    await scan(t, id, "Z-BAY-A", "Z-TAG", after(enteredAt, 1_500));
    const entered = await waitForEvents(t, (got) => got.filter((e) => e.type === "zone.entered").length >= 2);
    expect(entered.filter((e) => e.type === "zone.entered").map((e) => e.data.zone_id).sort()).toEqual([hall.id, bayA.id].sort());
    for (const e of entered) {
      expect(e.occurred_at).toBe(enteredAt);
      expect(e.data).toEqual({ asset_id: id, asset_external_key: "Z-PALLET", zone_id: e.data.zone_id, zone_external_key: e.data.zone_id === hall.id ? "Z-HALL" : "Z-BAY-A", observed_at: enteredAt });
    }

    // Bay A to bay B: the hall sees no crossing; bay A is left.
    const movedAt = after(enteredAt, 3_000);
    await scan(t, id, "Z-BAY-B", "Z-TAG", movedAt);
    await scan(t, id, "Z-BAY-B", "Z-TAG", after(movedAt, 1_500));
    await waitForEvents(t, (got) => got.some((e) => e.type === "zone.exited"));
    // Out to the yard: the hall is left too.
    const leftAt = after(movedAt, 3_000);
    await scan(t, id, "Z-YARD", "Z-TAG", leftAt);
    await scan(t, id, "Z-YARD", "Z-TAG", after(leftAt, 1_500));
    const all = await waitForEvents(t, (got) => got.filter((e) => e.type === "zone.exited").length >= 2);

    expect(all.map((e) => [e.type, e.data.zone_id, e.occurred_at])).toEqual([
      // Order of recording: the two entries (same instant), then each exit as it was confirmed.
      ...entered.map((e) => [e.type, e.data.zone_id, e.occurred_at]),
      ["zone.exited", bayA.id, movedAt],
      ["zone.exited", hall.id, leftAt],
    ]);
    // Nothing for the short visit (its due time passed long before the stay's).
    expect(all.some((e) => e.occurred_at === visitIn)).toBe(false);
    expect(bayB.is_zone).toBe(false);
  }, 90_000);
});

describe("asset.dwell_exceeded and asset.missing", () => {
  it("a dwell alert fires once per stay, and its due time survives a restart of reporting", async () => {
    const t = alertsOrg;
    await location(t, { name: "Dock", external_key: "A-DOCK", max_dwell_s: 2 });
    await location(t, { name: "Gate", external_key: "A-GATE" });
    const id = await asset(t, "A-CRATE", "A-TAG-1");
    await events(t);

    const arrived = observedAt();
    await scan(t, id, "A-DOCK", "A-TAG-1", arrived);
    // Due in about 2 s: reporting stops and starts meanwhile; the due time is in Postgres.
    expect((await pendingAlerts(t.orgId, id)).dwell_due_at?.getTime()).toBe(Date.parse(arrived) + 2000);
    await restartReporting();
    const fired = await waitForEvents(t, (got) => got.some((e) => e.type === "asset.dwell_exceeded" && e.data.asset_id === id));
    const dwell = fired.filter((e) => e.type === "asset.dwell_exceeded" && e.data.asset_id === id);
    expect(dwell).toHaveLength(1);
    expect(dwell[0]!.occurred_at).toBe(new Date(Date.parse(arrived) + 2000).toISOString());
    expect(dwell[0]!.data).toEqual({ asset_id: id, asset_external_key: "A-CRATE", location_id: dwell[0]!.data.location_id, location_external_key: "A-DOCK", since: arrived, max_dwell_s: 2 });

    // Still at the dock, read again, reporting restarted again: the stay's alert went out; nothing is pending.
    await scan(t, id, "A-DOCK", "A-TAG-1", observedAt());
    await restartReporting();
    expect((await pendingAlerts(t.orgId, id)).dwell_due_at).toBeNull();
    // A new stay (gate, then back at the dock) is a new episode: one more alert.
    await scan(t, id, "A-GATE", "A-TAG-1", observedAt());
    const back = observedAt();
    await scan(t, id, "A-DOCK", "A-TAG-1", back);
    const again = await waitForEvents(t, (got) => got.filter((e) => e.type === "asset.dwell_exceeded" && e.data.asset_id === id).length >= 2);
    expect(again.filter((e) => e.type === "asset.dwell_exceeded" && e.data.asset_id === id).map((e) => e.data.since)).toEqual([arrived, back]);
  }, 90_000);

  it("a missing alert fires once per absence, survives a restart, and starts over when the asset is seen again", async () => {
    const t = alertsOrg;
    await location(t, { name: "Shelf", external_key: "A-SHELF" });
    const id = await asset(t, "A-DRILL", "A-TAG-2");
    expect((await api(t, "PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 2 })).status).toBe(200);
    await events(t);

    const seen = observedAt();
    await scan(t, id, "A-SHELF", "A-TAG-2", seen);
    await eventually(async () => ((await pendingAlerts(t.orgId, id)).missing_due_at?.getTime() === Date.parse(seen) + 2000 ? true : undefined), 20_000, 50);
    await restartReporting();
    const mine = (got: FeedEvent[]) => got.filter((e) => e.type === "asset.missing" && e.data.asset_id === id);
    const fired = await waitForEvents(t, (got) => mine(got).length >= 1);
    expect(mine(fired)).toHaveLength(1);
    expect(mine(fired)[0]!.occurred_at).toBe(new Date(Date.parse(seen) + 2000).toISOString());
    expect(mine(fired)[0]!.data).toEqual({ asset_id: id, asset_external_key: "A-DRILL", last_seen_at: seen, last_location_id: mine(fired)[0]!.data.last_location_id, missing_after_s: 2 });

    await restartReporting();
    expect((await pendingAlerts(t.orgId, id)).missing_due_at).toBeNull();
    // Seen again: a new absence, a new alert.
    const seenAgain = observedAt();
    await scan(t, id, "A-SHELF", "A-TAG-2", seenAgain);
    const twice = await waitForEvents(t, (got) => mine(got).length >= 2);
    expect(mine(twice).map((e) => e.data.last_seen_at)).toEqual([seen, seenAgain]);
    // Turning it off leaves nothing pending.
    expect((await api(t, "PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 0 })).status).toBe(200);
    await scan(t, id, "A-SHELF", "A-TAG-2", observedAt());
    await eventually(async () => ((await pendingAlerts(t.orgId, id)).missing_due_at === null ? true : undefined), 20_000, 50);
  }, 90_000);
});

describe("isolation", () => {
  it("each organization sees only its own alerts, under its own settings", async () => {
    const zones = await events(zonesOrg);
    const alerts = await events(alertsOrg);
    expect(zones.length).toBeGreaterThan(0);
    expect(alerts.length).toBeGreaterThan(0);
    expect(zones.every((e) => e.org_id === zonesOrg.orgId)).toBe(true);
    expect(alerts.every((e) => e.org_id === alertsOrg.orgId)).toBe(true);
    // missing_after_s was set only for the alerts organization.
    expect(zones.some((e) => e.type === "asset.missing")).toBe(false);
    expect(alerts.some((e) => e.type.startsWith("zone."))).toBe(false);

    // A third organization with a zone and the default debounce (60 s): a brief stay there is no event in anyone's feed.
    const other = await stack.tenant("Other Org");
    await location(other, { name: "Hall", external_key: "Z-HALL", is_zone: true });
    const id = await asset(other, "Z-PALLET", "Z-TAG");
    await events(other);
    await scan(other, id, "Z-HALL", "Z-TAG", observedAt());
    const pool = createPool(stack.db.url, 1);
    try {
      const { rows } = await pool.query(`SELECT inside, crossed_at IS NOT NULL AS pending, extract(epoch FROM due_at - crossed_at)::int AS wait FROM reporting.zone_presence WHERE org_id = $1`, [other.orgId]);
      expect(rows).toEqual([{ inside: false, pending: true, wait: 60 }]);
    } finally {
      await pool.end();
    }
    expect(await events(other)).toEqual([]);
    expect((await events(zonesOrg)).length).toBe(zones.length);
  }, 60_000);
});

describe("organizations that turn alerts on later", () => {
  /** How many assets of the organization reporting keeps alert state for. */
  async function keptStates(orgId: number): Promise<number> {
    const pool = createPool(stack.db.url, 1);
    try {
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM reporting.alert_assets WHERE org_id = $1`, [orgId]);
      return rows[0].n as number;
    } finally {
      await pool.end();
    }
  }

  it("keep no state until then; a dwell limit set later judges each stay from its real arrival", async () => {
    const t = await stack.tenant("Late Dwell Org");
    const bay = await location(t, { name: "Bay", external_key: "L-BAY" });
    await location(t, { name: "Yard", external_key: "L-YARD" });
    const stayed = await asset(t, "L-STAYED", "L-TAG-1");
    const moved = await asset(t, "L-MOVED", "L-TAG-2");
    // One asset read at the bay twice (its stay began at the first read), the other in the yard first, then at the bay.
    const arrived = observedAt(-8000);
    await scan(t, stayed, "L-BAY", "L-TAG-1", arrived);
    await scan(t, moved, "L-YARD", "L-TAG-2", observedAt(-7000));
    const movedIn = observedAt(-6000);
    await scan(t, moved, "L-BAY", "L-TAG-2", movedIn);
    await scan(t, stayed, "L-BAY", "L-TAG-1", observedAt(-5000));
    expect(await keptStates(t.orgId)).toBe(0);

    expect((await api(t, "PATCH", `/api/v1/locations/${bay.id}`, { max_dwell_s: 3 })).status).toBe(200);
    const dwell = (got: FeedEvent[]) => got.filter((e) => e.type === "asset.dwell_exceeded");
    const fired = await waitForEvents(t, (got) => dwell(got).length >= 2);
    expect(dwell(fired).map((e) => [e.data.asset_id, e.data.since, e.occurred_at]).sort()).toEqual(
      [
        [stayed, arrived, new Date(Date.parse(arrived) + 3000).toISOString()],
        [moved, movedIn, new Date(Date.parse(movedIn) + 3000).toISOString()],
      ].sort(),
    );
    expect(await keptStates(t.orgId)).toBe(2);
  }, 90_000);

  it("missing_after_s set later: assets last seen before it go missing once, from their last sighting", async () => {
    const t = await stack.tenant("Late Missing Org");
    await location(t, { name: "Rack", external_key: "M-RACK" });
    const id = await asset(t, "M-SAW", "M-TAG");
    const seen = observedAt(-4000);
    await scan(t, id, "M-RACK", "M-TAG", seen);
    expect(await keptStates(t.orgId)).toBe(0);

    expect((await api(t, "PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 1 })).status).toBe(200);
    const missing = (got: FeedEvent[]) => got.filter((e) => e.type === "asset.missing");
    const fired = await waitForEvents(t, (got) => missing(got).length >= 1);
    expect(missing(fired).map((e) => [e.data.asset_id, e.data.last_seen_at, e.occurred_at])).toEqual([
      [id, seen, new Date(Date.parse(seen) + 1000).toISOString()],
    ]);
    // Turned off again, the state stays kept: a later sighting updates it and nothing more fires.
    expect((await api(t, "PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 0 })).status).toBe(200);
    await scan(t, id, "M-RACK", "M-TAG", observedAt());
    await eventually(async () => ((await pendingAlerts(t.orgId, id)).missing_due_at === null ? true : undefined), 20_000, 50);
    expect(await keptStates(t.orgId)).toBe(1);
    expect(missing(await events(t))).toHaveLength(1);
  }, 60_000);
});
