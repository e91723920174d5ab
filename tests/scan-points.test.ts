/**
 * Scan points (EXTENSIONS.md section 5) against a real stack (catalog,
 * tracking, gateway): CRUD under /api/v1/scan-points and its rules (strict
 * bodies, location by either form, (source, antenna) unique among live rows,
 * validity, scopes, path ids, 404 across organizations), and scans without a
 * location resolved through them: by source, by source + antenna, the
 * `unknown_scan_point` dead letter, per organization, and a scan point used
 * by a scan right after its create (catalog writes come first).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "@whereabouts/shared/testing";
import { deadLetters, publishScan } from "../services/tracking/src/testing/tracking-fixtures.ts";
import { startStack, type Stack, apiCaller, type ApiBody } from "./harness.ts";

let stack: Stack;
let t: Awaited<ReturnType<Stack["tenant"]>>;

beforeAll(async () => {
  stack = await startStack({ label: "scan_points", services: ["catalog", "tracking"] });
  t = await stack.tenant("Scan Point Org");
}, 120_000);
afterAll(async () => stack?.close());

type Body = ApiBody;
const api = apiCaller(() => stack, () => t.auth);

const fields = (body: Body) => (body.error.fields as Array<{ field: string; code: string }>).map((f) => [f.field, f.code]).sort();

async function location(key: string, auth = t.auth) {
  const res = await api("POST", "/api/v1/locations", { name: key, external_key: key }, auth);
  expect(res.status).toBe(201);
  return res.body.data as { id: number; external_key: string };
}

describe("/api/v1/scan-points", () => {
  it("creates by location_id or location_external_key, reads, lists, patches and deletes", async () => {
    const dock = await location("SP-DOCK");
    const yard = await location("SP-YARD");
    const created = await api("POST", "/api/v1/scan-points", { source: "portal-1", antenna: 2, location_id: dock.id });
    expect(created.status).toBe(201);
    const point = created.body.data;
    expect(created.headers.location).toBe(`/api/v1/scan-points/${point.id}`);
    expect(point).toMatchObject({ source: "portal-1", antenna: 2, location_id: dock.id, location_external_key: "SP-DOCK", valid_to: null, deleted_at: null });
    expect(Object.keys(point).sort()).toEqual(
      ["id", "source", "antenna", "location_id", "location_external_key", "valid_from", "valid_to", "created_at", "updated_at", "deleted_at"].sort(),
    );
    const byKey = await api("POST", "/api/v1/scan-points", { source: "portal-1", location_external_key: "SP-YARD" });
    expect(byKey.status).toBe(201);
    expect(byKey.body.data).toMatchObject({ antenna: null, location_id: yard.id, location_external_key: "SP-YARD" });

    expect((await api("GET", `/api/v1/scan-points/${point.id}`)).body.data).toEqual(point);
    const list = await api("GET", "/api/v1/scan-points?source=portal-1");
    expect(list.status).toBe(200);
    // Default order: source, the default mapping (antenna null) first.
    expect(list.body).toMatchObject({ limit: 50, offset: 0, total_count: 2 });
    expect(list.body.data.map((p: Body) => p.antenna)).toEqual([null, 2]);
    expect((await api("GET", `/api/v1/scan-points?location_external_key=SP-DOCK`)).body.data.map((p: Body) => p.id)).toEqual([point.id]);
    expect((await api("GET", `/api/v1/scan-points?antenna=2`)).body.total_count).toBe(1);

    const moved = await api("PATCH", `/api/v1/scan-points/${point.id}`, { location_external_key: "SP-YARD", id: point.id, created_at: point.created_at });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ location_id: yard.id, location_external_key: "SP-YARD" });
    expect(moved.body.data.updated_at > point.updated_at).toBe(true);
    const same = await api("PATCH", `/api/v1/scan-points/${point.id}`, { antenna: 2 });
    expect(same.body.data.updated_at).toBe(moved.body.data.updated_at);

    expect((await api("DELETE", `/api/v1/scan-points/${point.id}`)).status).toBe(204);
    expect((await api("DELETE", `/api/v1/scan-points/${point.id}`)).status).toBe(404);
    expect((await api("GET", `/api/v1/scan-points/${point.id}`)).status).toBe(404);
    expect((await api("GET", "/api/v1/scan-points?source=portal-1")).body.total_count).toBe(1);
    const withDeleted = await api("GET", "/api/v1/scan-points?source=portal-1&include_deleted=true");
    expect(withDeleted.body.data.find((p: Body) => p.id === point.id).deleted_at).not.toBeNull();
  });

  it("keeps one live mapping per (source, antenna); null is the source's default, a deleted one frees the pair", async () => {
    const hall = await location("SP-HALL");
    const first = await api("POST", "/api/v1/scan-points", { source: "gate-9", antenna: 0, location_id: hall.id });
    expect(first.status).toBe(201);
    const again = await api("POST", "/api/v1/scan-points", { source: "gate-9", antenna: 0, location_id: hall.id });
    expect(again.status).toBe(409);
    expect(again.body.error.type).toBe("conflict");
    expect((await api("POST", "/api/v1/scan-points", { source: "gate-9", location_id: hall.id })).status).toBe(201);
    expect((await api("POST", "/api/v1/scan-points", { source: "gate-9", antenna: null, location_id: hall.id })).status).toBe(409);
    const other = await api("POST", "/api/v1/scan-points", { source: "gate-9", antenna: 1, location_id: hall.id });
    expect(other.status).toBe(201);
    expect((await api("PATCH", `/api/v1/scan-points/${other.body.data.id}`, { antenna: 0 })).status).toBe(409);
    expect((await api("DELETE", `/api/v1/scan-points/${first.body.data.id}`)).status).toBe(204);
    expect((await api("PATCH", `/api/v1/scan-points/${other.body.data.id}`, { antenna: 0 })).status).toBe(200);
  });

  it("refuses bad bodies with the spec's errors, and writes nothing", async () => {
    const hall = await location("SP-BAD");
    const before = (await api("GET", "/api/v1/scan-points?include_deleted=true")).body.total_count;
    const missing = await api("POST", "/api/v1/scan-points", { location_id: hall.id });
    expect(missing.status).toBe(400);
    expect(fields(missing.body)).toEqual([["source", "required"]]);
    expect(fields((await api("POST", "/api/v1/scan-points", { source: "x" })).body)).toEqual([["location_id", "required"]]);
    const bad = await api("POST", "/api/v1/scan-points", {
      source: "has.dot",
      antenna: -1,
      location_id: hall.id,
      location_external_key: "SP-BAD",
      colour: "red",
      id: 5,
    });
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(
      [
        ["antenna", "too_small"],
        ["colour", "unknown_field"],
        ["id", "read_only"],
        ["location_external_key", "ambiguous_fields"],
        ["location_id", "ambiguous_fields"],
        ["source", "invalid_value"],
      ].sort(),
    );
    expect(fields((await api("POST", "/api/v1/scan-points", { source: "s", location_id: 2147483600 })).body)).toEqual([["location_id", "fk_not_found"]]);
    expect(fields((await api("POST", "/api/v1/scan-points", { source: "s", location_external_key: "NOPE" })).body)).toEqual([
      ["location_external_key", "fk_not_found"],
    ]);
    expect(fields((await api("POST", "/api/v1/scan-points", { source: "s", location_id: hall.id, valid_from: "2026-01-01" })).body)).toEqual([
      ["valid_from", "invalid_value"],
    ]);
    expect((await api("POST", "/api/v1/scan-points", { source: "s", antenna: "1", location_id: hall.id })).body.error.type).toBe("bad_request");
    expect((await api("POST", "/api/v1/scan-points", "[]")).status).toBe(400);
    expect((await api("PATCH", "/api/v1/scan-points/999999", { source: "x" })).status).toBe(404);
    const wrongType = await stack.gateway.inject({ method: "POST", url: "/api/v1/scan-points", headers: { ...t.auth, "content-type": "text/plain" }, payload: "{}" });
    expect(wrongType.statusCode).toBe(415);
    const created = (await api("POST", "/api/v1/scan-points", { source: "ok-1", location_id: hall.id })).body.data;
    const patch = await api("PATCH", `/api/v1/scan-points/${created.id}`, { source: null, location_id: null, created_at: "2020-01-01T00:00:00Z", color: 1 });
    expect(fields(patch.body)).toEqual(
      [
        ["color", "unknown_field"],
        ["created_at", "read_only"],
        ["location_id", "invalid_value"],
        ["source", "invalid_value"],
      ].sort(),
    );
    expect((await api("GET", `/api/v1/scan-points/${created.id}`)).body.data).toEqual(created);
    expect((await api("GET", "/api/v1/scan-points?include_deleted=true")).body.total_count).toBe(before + 1);
  });

  it("applies path id rules, list limits and scopes; 404 across organizations", async () => {
    expect(fields((await api("GET", "/api/v1/scan-points/0")).body)).toEqual([["scan_point_id", "too_small"]]);
    expect(fields((await api("GET", "/api/v1/scan-points/2147483648")).body)).toEqual([["scan_point_id", "too_large"]]);
    expect((await api("GET", "/api/v1/scan-points/abc")).status).toBe(400);
    expect((await api("GET", "/api/v1/scan-points/2147483647")).status).toBe(404);
    expect(fields((await api("GET", "/api/v1/scan-points?limit=201")).body)).toEqual([["limit", "too_large"]]);
    expect(fields((await api("GET", "/api/v1/scan-points?colour=red")).body)).toEqual([["colour", "unknown_field"]]);
    expect(fields((await api("GET", "/api/v1/scan-points?sort=name")).body)).toEqual([["sort", "invalid_value"]]);
    expect(fields((await api("GET", "/api/v1/scan-points?location_id=1&location_external_key=A")).body)).toEqual([
      ["location_external_key", "ambiguous_fields"],
      ["location_id", "ambiguous_fields"],
    ]);
    expect((await api("PUT", "/api/v1/scan-points")).headers.allow).toBe("GET, HEAD, POST");

    const hall = await location("SP-SCOPE");
    const point = (await api("POST", "/api/v1/scan-points", { source: "scoped", location_id: hall.id })).body.data;
    const { key: readKey } = await stack.createKey({ org: t.orgId, scopes: "locations:read" });
    const reader = { authorization: `Bearer ${readKey}` };
    expect((await api("GET", `/api/v1/scan-points/${point.id}`, undefined, reader)).status).toBe(200);
    expect((await api("POST", "/api/v1/scan-points", { source: "s2", location_id: hall.id }, reader)).status).toBe(403);
    expect((await api("DELETE", `/api/v1/scan-points/${point.id}`, undefined, reader)).status).toBe(403);
    const { key: assetKey } = await stack.createKey({ org: t.orgId, scopes: "assets:read" });
    expect((await api("GET", "/api/v1/scan-points", undefined, { authorization: `Bearer ${assetKey}` })).status).toBe(403);

    const other = await stack.tenant("Other Scan Point Org");
    expect((await api("GET", `/api/v1/scan-points/${point.id}`, undefined, other.auth)).status).toBe(404);
    expect((await api("PATCH", `/api/v1/scan-points/${point.id}`, { antenna: 3 }, other.auth)).status).toBe(404);
    expect((await api("DELETE", `/api/v1/scan-points/${point.id}`, undefined, other.auth)).status).toBe(404);
    expect((await api("GET", "/api/v1/scan-points", undefined, other.auth)).body.total_count).toBe(0);
    // Another organization's location is not a location of this one.
    expect(fields((await api("POST", "/api/v1/scan-points", { source: "s", location_id: hall.id }, other.auth)).body)).toEqual([
      ["location_id", "fk_not_found"],
    ]);
  });

  it("lists only currently effective scan points (validity like other master data)", async () => {
    const hall = await location("SP-VALID");
    const future = await api("POST", "/api/v1/scan-points", { source: "later", location_id: hall.id, valid_from: "2999-01-01T00:00:00+02:00" });
    expect(future.body.data.valid_from).toBe("2998-12-31T22:00:00.000Z");
    expect((await api("GET", "/api/v1/scan-points?source=later")).body.total_count).toBe(0);
    // By id, like other records: shown whatever its validity.
    expect((await api("GET", `/api/v1/scan-points/${future.body.data.id}`)).status).toBe(200);
  });
});

/* ------------------------------------------------------------ resolution */

const scan = (tag: string, extra: Record<string, unknown> = {}) => ({
  observed_at: new Date().toISOString(),
  tags: [{ tag_type: "rfid", value: tag }],
  ...extra,
});

async function taggedAsset(tag: string, auth = t.auth) {
  const res = await api("POST", "/api/v1/assets", { name: tag, tags: [{ tag_type: "rfid", value: tag }] }, auth);
  expect(res.status).toBe(201);
  return res.body.data as { id: number };
}

async function historyOf(assetId: number, count: number, auth = t.auth) {
  return eventually(async () => {
    const res = await api("GET", `/api/v1/assets/${assetId}/history?sort=event_observed_at`, undefined, auth);
    return res.body.total_count === count ? (res.body.data as Body[]) : undefined;
  }, 20_000, 50);
}

async function deadLetter(match: (text: string) => boolean) {
  return eventually(async () => (await deadLetters(stack.nc)).find((m) => match(m.text)), 20_000, 100);
}

describe("scans without a location", () => {
  it("resolve by source (the default mapping) and by source + antenna", async () => {
    const dock = await location("RES-DOCK");
    const door = await location("RES-DOOR");
    expect((await api("POST", "/api/v1/scan-points", { source: "res-reader", location_id: dock.id })).status).toBe(201);
    expect((await api("POST", "/api/v1/scan-points", { source: "res-reader", antenna: 3, location_id: door.id })).status).toBe(201);
    const asset = await taggedAsset("RES-TAG");
    const t0 = Date.parse("2026-11-20T10:00:00Z");
    const at = (s: number) => new Date(t0 + s * 1000).toISOString();
    await publishScan(stack.nc, t.orgId, scan("RES-TAG", { observed_at: at(0) }), "res-reader");
    await publishScan(stack.nc, t.orgId, scan("RES-TAG", { observed_at: at(10), antenna: 3 }), "res-reader");
    // Antenna 7 has no mapping of its own: the source's default.
    await publishScan(stack.nc, t.orgId, scan("RES-TAG", { observed_at: at(20), antenna: 7 }), "res-reader");
    // A location in the payload wins: every existing rule holds.
    await publishScan(stack.nc, t.orgId, scan("RES-TAG", { observed_at: at(30), antenna: 3, location: { external_key: "RES-DOCK" } }), "res-reader");
    const rows = await historyOf(asset.id, 4);
    expect(rows.map((r) => [r.event_observed_at, r.location_external_key])).toEqual([
      [at(0), "RES-DOCK"],
      [at(10), "RES-DOOR"],
      [at(20), "RES-DOCK"],
      [at(30), "RES-DOCK"],
    ]);
  });

  it("an unmapped source or antenna is dead-lettered as unknown_scan_point; a bad antenna as invalid_schema", async () => {
    const gate = await location("UNK-GATE");
    expect((await api("POST", "/api/v1/scan-points", { source: "unk-reader", antenna: 1, location_id: gate.id })).status).toBe(201);
    await taggedAsset("UNK-TAG");
    await publishScan(stack.nc, t.orgId, scan("UNK-TAG", { event_id: "unk-no-point" }), "nobody-maps-me");
    const letter = await deadLetter((text) => text.includes("unk-no-point"));
    expect(letter.reason).toBe("unknown_scan_point");
    expect(letter.subject).toBe(`scans.dlq.${t.orgId}`);
    // Only antenna 1 is mapped and there is no default.
    await publishScan(stack.nc, t.orgId, scan("UNK-TAG", { event_id: "unk-antenna-2", antenna: 2 }), "unk-reader");
    expect((await deadLetter((text) => text.includes("unk-antenna-2"))).reason).toBe("unknown_scan_point");
    await publishScan(stack.nc, t.orgId, scan("UNK-TAG", { event_id: "unk-bad-antenna", antenna: -1 }), "unk-reader");
    expect((await deadLetter((text) => text.includes("unk-bad-antenna"))).reason).toBe("invalid_schema");
    // Deleted or not yet effective mappings resolve nothing.
    const late = await api("POST", "/api/v1/scan-points", { source: "unk-late", location_id: gate.id, valid_from: "2999-01-01T00:00:00Z" });
    expect(late.status).toBe(201);
    await publishScan(stack.nc, t.orgId, scan("UNK-TAG", { event_id: "unk-late" }), "unk-late");
    expect((await deadLetter((text) => text.includes('"unk-late"'))).reason).toBe("unknown_scan_point");
    const gone = await api("POST", "/api/v1/scan-points", { source: "unk-gone", location_id: gate.id });
    expect((await api("DELETE", `/api/v1/scan-points/${gone.body.data.id}`)).status).toBe(204);
    await publishScan(stack.nc, t.orgId, scan("UNK-TAG", { event_id: "unk-gone" }), "unk-gone");
    expect((await deadLetter((text) => text.includes('"unk-gone"'))).reason).toBe("unknown_scan_point");
  });

  it("are resolved per organization: another organization's scan point of the same source does not apply", async () => {
    const other = await stack.tenant("Iso Scan Point Org");
    const theirs = await location("ISO-THEIRS", other.auth);
    const ours = await location("ISO-OURS");
    expect((await api("POST", "/api/v1/scan-points", { source: "shared-name", location_id: theirs.id }, other.auth)).status).toBe(201);
    await taggedAsset("ISO-TAG");
    await publishScan(stack.nc, t.orgId, scan("ISO-TAG", { event_id: "iso-ours-1" }), "shared-name");
    expect((await deadLetter((text) => text.includes("iso-ours-1"))).reason).toBe("unknown_scan_point");
    // The same source name maps to each organization's own location.
    expect((await api("POST", "/api/v1/scan-points", { source: "shared-name", location_id: ours.id })).status).toBe(201);
    const theirAsset = await taggedAsset("ISO-TAG", other.auth);
    const ourAsset = (await api("GET", "/api/v1/assets?q=ISO-TAG")).body.data[0];
    await publishScan(stack.nc, other.orgId, scan("ISO-TAG"), "shared-name");
    await publishScan(stack.nc, t.orgId, scan("ISO-TAG"), "shared-name");
    expect((await historyOf(theirAsset.id, 1, other.auth))[0]!.location_id).toBe(theirs.id);
    expect((await historyOf(ourAsset.id, 1))[0]!.location_id).toBe(ours.id);
  });

  it("catalog writes come first: a scan point created and used at once is never dead-lettered", async () => {
    const bay = await location("FAST-BAY");
    const before = (await deadLetters(stack.nc)).length;
    const assets: number[] = [];
    for (let i = 0; i < 30; i++) {
      assets.push((await taggedAsset(`FAST-SP-${i}`)).id);
      expect((await api("POST", "/api/v1/scan-points", { source: `fast-${i}`, antenna: i % 3 === 0 ? null : i, location_id: bay.id })).status).toBe(201);
      await publishScan(stack.nc, t.orgId, scan(`FAST-SP-${i}`, i % 3 === 0 ? {} : { antenna: i }), `fast-${i}`);
    }
    for (const id of assets) expect((await historyOf(id, 1))[0]!.location_id).toBe(bay.id);
    expect((await deadLetters(stack.nc)).length).toBe(before);
  });
});
