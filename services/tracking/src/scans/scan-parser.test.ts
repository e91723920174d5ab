import { describe, expect, it } from "vitest";
import { formatMicros, parseRfc3339 } from "@whereabouts/shared";
import { parseScanMessage, type ScanMessage } from "./scan-parser.ts";

const message = (subject: string, payload: unknown, seq = 7): ScanMessage => ({
  subject,
  data: typeof payload === "string" ? new TextEncoder().encode(payload) : new TextEncoder().encode(JSON.stringify(payload)),
  seq,
  timestampNanos: 1_700_000_000_000_000_000n,
});

const good = {
  observed_at: "2026-11-20T10:15:00.250Z",
  location: { external_key: "DOCK-1" },
  tags: [{ tag_type: "rfid", value: "E280" }],
};

describe("parseRfc3339", () => {
  it.each([
    ["2026-11-20T10:15:00Z", "2026-11-20T10:15:00.000000Z"],
    ["2026-11-20T10:15:00.1Z", "2026-11-20T10:15:00.100000Z"],
    ["2026-11-20T10:15:00.123456789Z", "2026-11-20T10:15:00.123456Z"],
    ["2026-11-20T12:15:00.999999999+02:00", "2026-11-20T10:15:00.999999Z"],
    ["2026-11-20t05:45:00-04:30", "2026-11-20T10:15:00.000000Z"],
    ["2024-02-29T23:59:59Z", "2024-02-29T23:59:59.000000Z"],
    ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000Z"],
    ["0099-03-01T00:00:00Z", "0099-03-01T00:00:00.000000Z"],
  ])("%s → %s (UTC, truncated to µs)", (text, expected) => {
    expect(formatMicros(parseRfc3339(text)!)).toBe(expected);
  });

  it.each([
    "2026-11-20",
    "2026-11-20 10:15:00Z",
    "2026/11/20T10:15:00Z",
    "2026-11-20T10:15:00",
    "2026-11-20T10:15:00.1234567890Z",
    "2026-13-01T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "2026-11-20T24:00:00Z",
    "2026-11-20T10:60:00Z",
    "2026-11-20T10:15:60Z",
    "2026-11-20T10:15:00+24:00",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:00:00-05:00",
    "",
  ])("rejects %j", (text) => {
    expect(parseRfc3339(text)).toBeNull();
  });
});

describe("parseScanMessage", () => {
  it("parses a good scan: org from the subject, UTC µs, idempotency key", () => {
    const parsed = parseScanMessage(message("scans.12.dock-door_1", { ...good, event_id: "E1" }));
    expect(parsed).toEqual({
      kind: "scan",
      orgId: 12,
      key: "e:E1",
      observedAt: "2026-11-20T10:15:00.250000Z",
      observedUs: Date.parse("2026-11-20T10:15:00.250Z") * 1000,
      location: { external_key: "DOCK-1" },
      tags: good.tags,
    });
  });

  it("keys a scan without event_id by stream sequence and timestamp", () => {
    const parsed = parseScanMessage(message("scans.12.r", good, 42));
    expect(parsed).toMatchObject({ kind: "scan", key: "s:42:1700000000000000000" });
  });

  it("accepts each location form", () => {
    for (const location of [{ external_key: "K" }, { id: 5 }, { tag_type: "ble", value: "B" }]) {
      expect(parseScanMessage(message("scans.1.r", { ...good, location })).kind).toBe("scan");
    }
  });

  it("skips the dead-letter branch of SCANS", () => {
    expect(parseScanMessage(message("scans.dlq.12", "anything"))).toEqual({ kind: "skip" });
  });

  it.each([
    ["scans.abc.r", good, "invalid_subject", "unknown"],
    ["scans.0.r", good, "invalid_subject", "unknown"],
    ["scans.2147483648.r", good, "invalid_subject", "unknown"],
    ["scans.12", good, "invalid_subject", "12"],
    ["scans.12.a.b", good, "invalid_subject", "12"],
    ["scans.12.r", "{not json", "invalid_json", "12"],
    ["scans.12.r", "", "invalid_json", "12"],
    ["scans.12.r", [good], "invalid_schema", "12"],
    ["scans.12.r", { ...good, observed_at: "yesterday" }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, tags: [] }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, tags: Array.from({ length: 1001 }, () => good.tags[0]) }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, location: { id: 1, external_key: "K" } }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, location: { id: 0 } }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, unexpected: true }, "invalid_schema", "12"],
    ["scans.12.r", { ...good, event_id: "" }, "invalid_schema", "12"],
  ])("refuses %s %j as %s (DLQ org %s)", (subject, payload, reason, org) => {
    expect(parseScanMessage(message(subject, payload))).toMatchObject({ kind: "refused", reason, org });
  });

  it("refuses bytes that are not UTF-8", () => {
    const msg = { ...message("scans.3.r", ""), data: new Uint8Array([0x7b, 0xff, 0x7d]) };
    expect(parseScanMessage(msg)).toMatchObject({ kind: "refused", reason: "invalid_json" });
  });
});
