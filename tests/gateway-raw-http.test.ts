/**
 * The gateway on a real socket, with bytes no HTTP library would send
 * (issue 10): every non-2xx carries the spec's envelope (Content-Type
 * exactly application/json, request_id equal to X-Request-ID), HEAD answers
 * never carry a body, and a connection the server will not reuse is
 * announced with `Connection: close`; otherwise it stays usable.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@whereabouts/shared/testing";
import { fakeService, startStack, type FakeService, type Stack } from "./harness.ts";
import { RawConnection, rawRequest, type RawResponse, type ReadOutcome } from "./raw-http.ts";

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

let stack: Stack;
let catalog: FakeService;
let port: number;
let auth: [string, string];
const host: [string, string] = ["host", "127.0.0.1"];

beforeAll(async () => {
  stack = await startStack({ label: "gw_raw", services: [] });
  catalog = fakeService(stack.nc, "catalog");
  auth = ["authorization", `Bearer ${(await stack.tenant("Raw Org")).key}`];
  port = await freePort();
  await stack.gateway.listen({ host: "127.0.0.1", port });
});
afterAll(async () => {
  catalog?.stop();
  await stack?.close();
});

function responseOf(outcome: ReadOutcome): RawResponse {
  if (outcome.kind !== "response") throw new Error(`expected a response, got ${outcome.kind}: ${outcome.received.toString("latin1").slice(0, 200)}`);
  return outcome.response;
}

/** The spec's envelope, whole; returns `error`. */
function expectEnvelope(res: RawResponse, status: number, type: string, head = false) {
  expect(res.status).toBe(status);
  expect(res.headers["content-type"]).toBe("application/json");
  expect(Object.keys(res.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);
  if (head) {
    expect(res.body.length).toBe(0);
    return undefined;
  }
  const error = JSON.parse(res.body.toString("utf8")).error;
  expect(error).toMatchObject({ type, status });
  expect(error.request_id).toBe(res.headers["x-request-id"]);
  return error;
}

/** After an answer with Connection: close the server closes; the next request goes nowhere. */
async function expectClosed(conn: RawConnection) {
  expect(await conn.waitClosed()).toBe(true);
  expect(conn.pending.length).toBe(0);
}

/** The connection still serves a request. */
async function expectUsable(conn: RawConnection) {
  conn.send(rawRequest("GET", "/api/v1/orgs/me", [host, auth]));
  expect(responseOf(await conn.read()).status).toBe(200);
}

describe("requests the HTTP parser refuses", () => {
  const cases: Array<[label: string, bytes: string, status: number, type: string]> = [
    ["percent-encoded slashes", "GET %2Fapi%2Fv1%2Fassets HTTP/1.1\r\nhost: x\r\n\r\n", 400, "bad_request"],
    ["a space in the path", "GET /api/v1/as sets HTTP/1.1\r\nhost: x\r\n\r\n", 400, "bad_request"],
    ["a bare 'from= 5'", "GET /api/v1/assets/1/history?from= 5 HTTP/1.1\r\nhost: x\r\n\r\n", 400, "bad_request"],
    ["Content-Length with chunked", "POST /api/v1/assets HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n", 400, "bad_request"],
    ["a header without a colon", "GET /api/v1/assets HTTP/1.1\r\nhost: x\r\nnonsense\r\n\r\n", 400, "bad_request"],
    ["not HTTP at all after the method", "GET / HTTP/9.9\r\n\r\n", 400, "bad_request"],
  ];
  for (const [label, bytes, status, type] of cases) {
    it(`${label}: ${status} ${type} with the envelope and Connection: close`, async () => {
      const conn = await RawConnection.open(port);
      try {
        conn.send(bytes);
        const res = responseOf(await conn.read());
        expectEnvelope(res, status, type);
        expect(res.headers["x-request-id"]).toMatch(ULID);
        expect(res.headers.connection).toBe("close");
        await expectClosed(conn);
      } finally {
        conn.close();
      }
    });
  }

  it("HEAD never carries a body, even refused by the parser", async () => {
    for (const bytes of ["HEAD %2Fapi%2Fv1%2Fassets HTTP/1.1\r\nhost: x\r\n\r\n", "HEAD /api/v1/a b HTTP/1.1\r\nhost: x\r\n\r\n"]) {
      const conn = await RawConnection.open(port);
      try {
        conn.send(bytes);
        const res = responseOf(await conn.read({ head: true }));
        expectEnvelope(res, 400, "bad_request", true);
        await expectClosed(conn);
      } finally {
        conn.close();
      }
    }
  });

  it("a 17 KB X-Request-ID: 431 with the envelope and a fresh request id", async () => {
    const conn = await RawConnection.open(port);
    try {
      conn.send(rawRequest("GET", "/api/v1/assets", [host, auth, ["x-request-id", "r".repeat(17 * 1024)]]));
      const res = responseOf(await conn.read());
      const error = expectEnvelope(res, 431, "request_header_fields_too_large");
      expect(error.title).toBe("Request header fields too large");
      expect(res.headers["x-request-id"]).toMatch(ULID);
      expect(res.headers.connection).toBe("close");
      await expectClosed(conn);
    } finally {
      conn.close();
    }
  });

  it("uses the X-Request-ID of a refused request when it can be read", async () => {
    const conn = await RawConnection.open(port);
    try {
      conn.send("GET /a b HTTP/1.1\r\nhost: x\r\nx-request-id: mine-123\r\n\r\n");
      const res = responseOf(await conn.read());
      expect(expectEnvelope(res, 400, "bad_request").request_id).toBe("mine-123");
    } finally {
      conn.close();
    }
  });
});

describe("CONNECT, which Node hands over as a tunnel", () => {
  for (const [target, status, type] of [
    ["/api/v1/assets", 405, "method_not_allowed"],
    ["/api/v1/nowhere", 404, "not_found"],
    ["example.test:443", 400, "bad_request"],
  ] as const) {
    it(`CONNECT ${target}: ${status} with the envelope and Connection: close`, async () => {
      const conn = await RawConnection.open(port);
      try {
        conn.send(`CONNECT ${target} HTTP/1.1\r\nhost: example.test\r\nx-request-id: tunnel-1\r\n\r\n`);
        const res = responseOf(await conn.read());
        expect(expectEnvelope(res, status, type).request_id).toBe("tunnel-1");
        if (status === 405) expect(res.headers.allow).toBe("GET, HEAD, POST");
        expect(res.headers.connection).toBe("close");
        await expectClosed(conn);
      } finally {
        conn.close();
      }
    });
  }
});

describe("errors the gateway answers itself", () => {
  it("a missing Host on HTTP/1.1: 400 with the envelope, the connection stays usable", async () => {
    const conn = await RawConnection.open(port);
    try {
      conn.send("GET /api/v1/orgs/me HTTP/1.1\r\n\r\n");
      const res = responseOf(await conn.read());
      expectEnvelope(res, 400, "bad_request");
      expect(res.headers.connection).not.toBe("close");
      await expectUsable(conn);
    } finally {
      conn.close();
    }
  });

  it("keeps a kept-alive connection usable after 4xx answers, HEAD ones included, with no stray bytes", async () => {
    const conn = await RawConnection.open(port);
    try {
      const requests: Array<[string, string, Array<[string, string]>, string | undefined, number, string]> = [
        ["GET", "/api/v1/assets/0", [host, auth], undefined, 400, "validation_error"],
        ["HEAD", "/api/v1/assets/0", [host, auth], undefined, 400, "validation_error"],
        ["HEAD", "/api/v1/nowhere", [host, auth], undefined, 404, "not_found"],
        ["POST", "/api/v1/assets", [host], '{"name":"x"}', 401, "unauthorized"],
        ["POST", "/api/v1/assets", [host, auth, ["content-type", "text/plain"]], "x".repeat(50_000), 415, "unsupported_media_type"],
        ["POST", "/api/v1/assets", [host, auth, ["content-type", "application/json"]], "{bad", 400, "bad_request"],
        ["GET", "/api/v1/assets?q=%FF", [host, auth], undefined, 400, "bad_request"],
        ["OPTIONS", "/api/v1/assets", [host, auth], undefined, 405, "method_not_allowed"],
        ["GET", "/api/v1/assets/%E0%A4%A", [host, auth], undefined, 400, "bad_request"],
      ];
      for (const [method, target, headers, body, status, type] of requests) {
        conn.send(rawRequest(method, target, headers, body));
        const res = responseOf(await conn.read({ head: method === "HEAD" }));
        expectEnvelope(res, status, type, method === "HEAD");
        expect(res.headers.connection, `${method} ${target}`).not.toBe("close");
      }
      await expectUsable(conn);
      expect(conn.pending.length).toBe(0);
    } finally {
      conn.close();
    }
  });

  it("an absolute-form target is served as its path, and instance is that path", async () => {
    const conn = await RawConnection.open(port);
    try {
      conn.send(rawRequest("GET", "http://example.test/api/v1/assets/0?x=1", [host, auth]));
      const error = expectEnvelope(responseOf(await conn.read()), 400, "validation_error");
      expect(error.instance).toBe("/api/v1/assets/0");
      await expectUsable(conn);
    } finally {
      conn.close();
    }
  });

  it("a body over the limit: 413 with Connection: close", async () => {
    const conn = await RawConnection.open(port);
    try {
      conn.send(rawRequest("POST", "/api/v1/assets", [host, auth, ["content-type", "application/json"]], "x".repeat(1024 * 1024 + 1)));
      const res = responseOf(await conn.read());
      expectEnvelope(res, 413, "payload_too_large");
      expect(res.headers.connection).toBe("close");
    } finally {
      conn.close();
    }
  });
});
