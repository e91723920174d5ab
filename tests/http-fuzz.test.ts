/**
 * Property-based fuzzing of the whole stack through the gateway's socket
 * (tests/http-fuzz.ts): for every generated request, valid or hostile, the
 * answer keeps the contract. `npm test` runs a bounded number of cases
 * (FUZZ_TEST_RUNS, default 400); `npm run fuzz` runs a long one.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenApiValidator } from "./openapi-validator.ts";
import { checkExchange, emptyTotals, formatTotals, FuzzClient, fuzzCase, record, type FuzzCase } from "./http-fuzz.ts";
import { startFuzzStack, type FuzzStack } from "./http-fuzz-stack.ts";
import type { RawResponse } from "./raw-http.ts";

let fuzz: FuzzStack;

beforeAll(async () => {
  fuzz = await startFuzzStack("http_fuzz");
});
afterAll(async () => fuzz?.stack.close());

describe("the fuzzer's checks", () => {
  const validator = createOpenApiValidator();
  const get: FuzzCase = { kind: "http", label: "GET", method: "GET", target: "/api/v1/assets/1", headers: [], oversize: false, requestId: "mine" };
  const response = (status: number, headers: Record<string, string>, body: string): RawResponse => ({
    status,
    headers,
    headerLines: [],
    body: Buffer.from(body),
  });
  const envelope = (status: number, id: string) =>
    JSON.stringify({ error: { type: "not_found", title: "Not found", status, detail: "d", instance: "/api/v1/assets/1", request_id: id } });

  it("accept a proper error answer and catch every kind of violation", () => {
    const ok = response(404, { "content-type": "application/json", "x-request-id": "mine" }, envelope(404, "mine"));
    expect(checkExchange(get, { kind: "response", response: ok }, validator, false).problems).toEqual([]);
    const kinds = (res: RawResponse, c: FuzzCase = get) => checkExchange(c, { kind: "response", response: res }, validator, false).problems.map((p) => p.kind);
    expect(kinds(response(500, { "content-type": "application/json", "x-request-id": "mine" }, envelope(500, "mine")))).toEqual(["5xx"]);
    expect(kinds(response(400, { "content-type": "application/json", "x-request-id": "mine" }, '{"error":"Bad Request","message":"Client Error","statusCode":400}'))).toEqual(["envelope"]);
    expect(kinds(response(404, { "content-type": "application/json; charset=utf-8", "x-request-id": "mine" }, envelope(404, "mine")))).toEqual(["envelope"]);
    expect(kinds(response(404, { "content-type": "application/json", "x-request-id": "mine" }, envelope(404, "other")))).toEqual(["envelope"]);
    expect(kinds(response(404, { "content-type": "application/json", "x-request-id": "x", "access-control-allow-origin": "*" }, envelope(404, "x")))).toEqual([
      "cors",
      "request_id",
    ]);
    expect(kinds(response(404, { "content-type": "application/json", "x-request-id": "mine" }, envelope(404, "mine")), { ...get, method: "HEAD" })).toEqual(["head_body"]);
    expect(new Set(kinds(response(200, { "content-type": "application/json", "x-request-id": "mine" }, '{"data":{"id":"1"}}')))).toEqual(
      new Set(["schema"]),
    );
    expect(checkExchange(get, { kind: "reset", received: Buffer.alloc(0) }, validator, true).problems.map((p) => p.kind)).toEqual(["connection"]);
  });
});

describe("fuzzing the API from docs/openapi.json", () => {
  it("keeps the contract on every response: no 5xx, the envelope on every non-2xx, valid 2xx bodies, sound connections", async () => {
    const runs = Number(process.env.FUZZ_TEST_RUNS ?? 400);
    const client = new FuzzClient(fuzz.port);
    const totals = emptyTotals();
    const started = Date.now();
    try {
      await fc.assert(
        fc.asyncProperty(fuzzCase(fuzz.keys), async (c) => {
          const exchange = await client.send(c);
          record(totals, c, exchange);
          if (exchange.problems.length) {
            throw new Error(`${c.label} ${c.target.slice(0, 200)}: ${exchange.problems.map((p) => `[${p.kind}] ${p.detail}`).join("; ")}`);
          }
        }),
        { numRuns: runs, ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}) },
      );
    } finally {
      client.close();
      totals.durationMs = Date.now() - started;
      console.log(formatTotals(totals));
    }
    expect(totals.requests).toBeGreaterThanOrEqual(runs);
    expect(totals.fiveXx + totals.envelopeViolations).toBe(0);
  });
});
