/** W3C traceparent: parsing (invalid headers start a new trace), generation, continuation. */
import { describe, expect, it } from "vitest";
import { continueTrace, formatTraceparent, newTrace, parseTraceparent } from "./tracing.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";
const VALID = `00-${TRACE}-${SPAN}-01`;
const FORMAT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;

describe("parseTraceparent", () => {
  it("reads a valid version 00 header", () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: TRACE, spanId: SPAN, flags: "01" });
    expect(parseTraceparent(` ${VALID.replace("-01", "-00")} `)).toEqual({ traceId: TRACE, spanId: SPAN, flags: "00" });
  });

  it("accepts a later version with extra fields, using the four it knows", () => {
    expect(parseTraceparent(`cc-${TRACE}-${SPAN}-01-what-the-future-holds`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: "01" });
  });

  it.each([
    ["absent", undefined],
    ["empty", ""],
    ["uppercase hex", VALID.toUpperCase()],
    ["all-zero trace id", `00-${"0".repeat(32)}-${SPAN}-01`],
    ["all-zero span id", `00-${TRACE}-${"0".repeat(16)}-01`],
    ["version ff", `ff-${TRACE}-${SPAN}-01`],
    ["version 00 with extra fields", `${VALID}-extra`],
    ["short trace id", `00-${TRACE.slice(1)}-${SPAN}-01`],
    ["garbage", "hello"],
  ])("refuses %s", (_name, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });
});

describe("newTrace / continueTrace", () => {
  it("starts valid, distinct, sampled traces", () => {
    const a = formatTraceparent(newTrace());
    const b = formatTraceparent(newTrace());
    expect(a).toMatch(FORMAT);
    expect(b).toMatch(FORMAT);
    expect(a.slice(3, 35)).not.toBe(b.slice(3, 35));
    expect(parseTraceparent(a)).toBeDefined();
  });

  it("keeps the caller's trace id and flags with a new span id", () => {
    const next = continueTrace(VALID.replace("-01", "-00"));
    expect(next.traceId).toBe(TRACE);
    expect(next.flags).toBe("00");
    expect(next.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(next.spanId).not.toBe(SPAN);
  });

  it("starts a new trace when the caller's header is absent or invalid", () => {
    expect(formatTraceparent(continueTrace(undefined))).toMatch(FORMAT);
    const fresh = continueTrace(`00-${"0".repeat(32)}-${SPAN}-01`);
    expect(fresh.traceId).not.toBe("0".repeat(32));
    expect(formatTraceparent(fresh)).toMatch(FORMAT);
  });
});
