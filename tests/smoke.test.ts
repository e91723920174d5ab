import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "./harness.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ label: "smoke" });
});
afterAll(async () => stack?.close());

describe("smoke", () => {
  it("answers orgs/me", async () => {
    const t = await stack.tenant("Smoke Org");
    const res = await stack.gateway.inject({ method: "GET", url: "/api/v1/orgs/me", headers: t.auth });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: t.orgId, name: "Smoke Org" });
    const ready = await stack.gateway.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode).toBe(200);
  });
});
