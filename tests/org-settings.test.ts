/**
 * Organization settings (EXTENSIONS.md section 5) against a real stack:
 * GET/PATCH /api/v1/orgs/me/settings (defaults, merge patch, the rules, the
 * scope, isolation), smoothing (off by default; the window's edges) and
 * history retention (only older rows go; the oldest kept row's
 * duration_seconds and the newest rows are unchanged).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createPool, scanSubject } from "@whereabouts/shared";
import { eventually } from "@whereabouts/shared/testing";
import { retireHistory } from "../services/tracking/src/history/history-retention.ts";
import { startStack, type Stack, apiCaller, type ApiBody } from "./harness.ts";

let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;

beforeAll(async () => {
  stack = await startStack({ label: "org_settings" });
  t = await stack.tenant("Settings Org");
}, 120_000);
afterAll(async () => stack?.close());

type Body = ApiBody;
const api = apiCaller(() => stack, () => t.auth);

const DEFAULTS = { smoothing_window_s: 0, zone_min_stay_s: 60, missing_after_s: 0, history_retention_days: null };

describe("GET/PATCH /api/v1/orgs/me/settings", () => {
  it("starts at the defaults and merges a patch; null clears history_retention_days", async () => {
    const initial = await api("GET", "/api/v1/orgs/me/settings");
    expect({ status: initial.status, body: initial.body }).toEqual({ status: 200, body: { data: DEFAULTS } });
    const patched = await api("PATCH", "/api/v1/orgs/me/settings", { smoothing_window_s: 30, history_retention_days: 90 });
    expect({ status: patched.status, body: patched.body }).toEqual({ status: 200, body: { data: { ...DEFAULTS, smoothing_window_s: 30, history_retention_days: 90 } } });
    expect((await api("PATCH", "/api/v1/orgs/me/settings", { history_retention_days: null })).body.data).toEqual({ ...DEFAULTS, smoothing_window_s: 30 });
    expect((await api("PATCH", "/api/v1/orgs/me/settings", {})).body.data).toEqual({ ...DEFAULTS, smoothing_window_s: 30 });
    expect((await api("GET", "/api/v1/orgs/me/settings")).body.data).toEqual({ ...DEFAULTS, smoothing_window_s: 30 });
    await api("PATCH", "/api/v1/orgs/me/settings", { smoothing_window_s: 0 });
  });

  it("refuses an unknown setting, negatives, nulls where not allowed, and wrong types", async () => {
    const bad = await api("PATCH", "/api/v1/orgs/me/settings", { colour: "red", smoothing_window_s: -1, zone_min_stay_s: null, missing_after_s: 2147483648 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.fields.map((f: { field: string; code: string }) => [f.field, f.code]).sort()).toEqual(
      [
        ["colour", "unknown_field"],
        ["missing_after_s", "too_large"],
        ["smoothing_window_s", "too_small"],
        ["zone_min_stay_s", "invalid_value"],
      ].sort(),
    );
    expect((await api("PATCH", "/api/v1/orgs/me/settings", { smoothing_window_s: "60" })).body.error.type).toBe("bad_request");
    expect((await api("PATCH", "/api/v1/orgs/me/settings", { smoothing_window_s: 1.5 })).status).toBe(400);
    expect((await api("PATCH", "/api/v1/orgs/me/settings", "[]")).status).toBe(400);
    expect((await api("GET", "/api/v1/orgs/me/settings")).body.data).toEqual(DEFAULTS);
  });

  it("needs settings:write to change, any key of the organization to read; isolated per organization", async () => {
    const { key } = await stack.createKey({ org: t.orgId, scopes: "assets:read" });
    const reader = { authorization: `Bearer ${key}` };
    expect((await api("GET", "/api/v1/orgs/me/settings", undefined, reader)).status).toBe(200);
    expect((await api("PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 5 }, reader)).status).toBe(403);
    const other = await stack.tenant("Other Settings Org");
    expect((await api("PATCH", "/api/v1/orgs/me/settings", { missing_after_s: 600 }, other.auth)).body.data.missing_after_s).toBe(600);
    expect((await api("GET", "/api/v1/orgs/me/settings")).body.data.missing_after_s).toBe(0);
    const { key: noOrg } = await stack.createKey({ org: null });
    const none = await api("GET", "/api/v1/orgs/me/settings", undefined, { authorization: `Bearer ${noOrg}` });
    expect(none.status).toBe(422);
    expect(none.body.error.type).toBe("missing_org_context");
  });
});

/** An organization with two locations and one tagged asset; scans go through NATS. */
async function site(name: string) {
  const org = await stack.tenant(name);
  const call = (method: string, url: string, body?: unknown) => api(method, url, body, org.auth);
  const a = (await call("POST", "/api/v1/locations", { name: "A", external_key: `${name.replace(/\W/g, "")}-A` })).body.data;
  const b = (await call("POST", "/api/v1/locations", { name: "B", external_key: `${name.replace(/\W/g, "")}-B` })).body.data;
  const tag = `${name.replace(/\W/g, "")}-TAG`;
  const asset = (await call("POST", "/api/v1/assets", { name: "Pallet", tags: [{ tag_type: "rfid", value: tag }] })).body.data;
  const scan = (location: { id: number }, at: string) =>
    stack.nc.publish(scanSubject(org.orgId, "gate-1"), JSON.stringify({ observed_at: at, location: { id: location.id }, tags: [{ tag_type: "rfid", value: tag }] }));
  const history = async () => (await call("GET", `/api/v1/assets/${asset.id}/history?sort=event_observed_at&limit=200`)).body;
  const lastSeen = async () => (await call("GET", `/api/v1/reports/asset-locations?asset_id=${asset.id}`)).body.data[0]?.asset_last_seen as string | undefined;
  return { org, call, a, b, asset, scan, history, lastSeen };
}

const at = (base: number, seconds: number) => new Date(base + seconds * 1000).toISOString();

describe("smoothing", () => {
  const base = Date.parse("2026-11-20T10:00:00.000Z");
  // A at 0; 30 and 59.999 are inside the window (no row); 60 is outside (a row, the new anchor);
  // 90 is inside it; B at 100 and A again at 110 are moves.
  const plan: Array<["a" | "b", number]> = [["a", 0], ["a", 30], ["a", 59.999], ["a", 60], ["a", 90], ["b", 100], ["a", 110]];

  it("is off by default: every read is a history row", async () => {
    const s = await site("Unsmoothed");
    for (const [where, sec] of plan) await s.scan(s[where], at(base, sec));
    await eventually(async () => ((await s.history()).total_count === plan.length ? true : undefined), 20_000, 100);
  });

  it("with a 60 s window, repeated reads at the same place within 60 s of the last row add none; last seen still advances", async () => {
    const s = await site("Smoothed");
    expect((await s.call("PATCH", "/api/v1/orgs/me/settings", { smoothing_window_s: 60 })).status).toBe(200);
    for (const [where, sec] of plan) await s.scan(s[where], at(base, sec));
    await eventually(async () => ((await s.lastSeen())?.startsWith("2026-11-20T10:01:50") ? true : undefined), 20_000, 100);
    const history = await s.history();
    expect(history.data.map((r: Body) => [r.event_observed_at, r.location_id])).toEqual([
      [at(base, 0), s.a.id],
      [at(base, 60), s.a.id],
      [at(base, 100), s.b.id],
      [at(base, 110), s.a.id],
    ]);
    expect(history.total_count).toBe(4);
    expect(history.data.map((r: Body) => r.duration_seconds)).toEqual([null, 60, 40, 10]);
  });
});

describe("history retention", () => {
  it("removes only rows older than history_retention_days; the oldest kept row's duration and the newest rows stay", async () => {
    const s = await site("Retained");
    const now = Date.now();
    const day = 86_400;
    const plan: Array<["a" | "b", number]> = [["a", -3 * day], ["b", -2 * day], ["a", -3600], ["b", -60]];
    for (const [where, sec] of plan) await s.scan(s[where], new Date(now + sec * 1000).toISOString());
    const before = await eventually(async () => {
      const h = await s.history();
      return h.total_count === 4 ? h : undefined;
    }, 20_000, 100);
    expect((await s.call("PATCH", "/api/v1/orgs/me/settings", { history_retention_days: 1 })).status).toBe(200);
    // A history read waits for tracking's catalog replica: the setting is applied once this answers.
    expect((await s.history()).total_count).toBe(4);

    const pool = createPool(stack.db.url, 2);
    try {
      // A pass told to stop removes nothing: it ends before its first batch.
      expect(await retireHistory(pool, createLogger("test", "silent"), undefined, { stopping: () => true })).toBe(0);
      expect((await s.history()).total_count).toBe(4);
      // Paced (it pauses between batches), a pass still removes all it must.
      expect(await retireHistory(pool, createLogger("test", "silent"), undefined, { dutyPercent: 50 })).toBe(2);
      expect(await retireHistory(pool, createLogger("test", "silent"))).toBe(0);
    } finally {
      await pool.end();
    }
    const after = await s.history();
    expect(after.total_count).toBe(2);
    expect(after.data).toEqual(before.data.slice(2));
    expect(after.data[0].duration_seconds).toBe(2 * day - 3600);
    // The other organizations keep everything.
    expect((await s.call("GET", "/api/v1/orgs/me/settings")).body.data.history_retention_days).toBe(1);
  });
});
