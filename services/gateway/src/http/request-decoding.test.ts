import { describe, expect, it } from "vitest";
import { AppError } from "@whereabouts/shared";
import { checkContentType, decodeJsonBody } from "./request-decoding.ts";

const typeOf = (fn: () => unknown) => {
  try {
    fn();
    return "ok";
  } catch (err) {
    return err instanceof AppError ? `${err.type}: ${err.detail}` : String(err);
  }
};

describe("checkContentType", () => {
  it.each([
    ["POST", "application/json", "ok"],
    ["POST", "application/json;charset=utf-8", "ok"],
    ["POST", "APPLICATION/JSON; Charset=\"UTF-8\"", "ok"],
    ["POST", undefined, "unsupported_media_type: Content-Type must be application/json"],
    ["POST", "application/json; charset=utf-16", "unsupported_media_type: Content-Type must be application/json"],
    ["POST", "application/json; charset", "unsupported_media_type: Content-Type must be application/json"],
    ["POST", "application/problem+json", "unsupported_media_type: Content-Type must be application/json"],
    ["PATCH", "application/merge-patch+json; charset=utf-8", "ok"],
    ["PATCH", "application/json", "unsupported_media_type: Content-Type must be application/merge-patch+json on PATCH operations"],
    ["DELETE", undefined, "ok"],
    ["GET", "text/plain", "ok"],
  ])("%s %s → %s", (method, header, expected) => {
    expect(typeOf(() => checkContentType(method, header))).toBe(expected);
  });
});

describe("decodeJsonBody", () => {
  const body = (text: string | Buffer) => (typeof text === "string" ? Buffer.from(text) : text);
  it("decodes JSON of any top-level shape on POST (the service judges the shape)", () => {
    expect(decodeJsonBody("POST", body('{"a":1}'))).toEqual({ a: 1 });
    expect(decodeJsonBody("POST", body("[1]"))).toEqual([1]);
    expect(decodeJsonBody("POST", body("null"))).toBeNull();
  });
  it.each([
    ["POST", "", "bad_request: Request body is not valid JSON"],
    ["POST", "{", "bad_request: Request body is not valid JSON"],
    ["POST", "{'a':1}", "bad_request: Request body is not valid JSON"],
    ["PATCH", "null", "bad_request: Request body must be a JSON object (RFC 7396)"],
    ["PATCH", "  null\n", "bad_request: Request body must be a JSON object (RFC 7396)"],
  ])("%s %j → %s", (method, text, expected) => {
    expect(typeOf(() => decodeJsonBody(method, body(text)))).toBe(expected);
  });
  it("rejects bytes that are not UTF-8", () => {
    expect(typeOf(() => decodeJsonBody("POST", Buffer.from([0x22, 0xc3, 0x28, 0x22])))).toBe("bad_request: Request body is not valid JSON");
  });
  it("has no body on GET, HEAD and DELETE", () => {
    for (const method of ["GET", "HEAD", "DELETE"]) expect(decodeJsonBody(method, body("{"))).toBeUndefined();
  });
});
