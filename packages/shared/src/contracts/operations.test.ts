/** The operation catalog is consistent with itself: what the gateway, the services and the document rely on. */
import { describe, expect, it } from "vitest";
import { rpcSubject } from "../subjects.ts";
import {
  BODY_ERRORS,
  BODY_MEDIA_TYPES,
  locationOf,
  OPERATION_ROUTES,
  OPERATIONS,
  operationNamed,
  operationsOf,
  PIPELINE_ERRORS,
  REPLY_SCHEMAS,
  REQUEST_SCHEMAS,
  SCOPES,
} from "./operations.ts";

const pathParams = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1]);

describe("the operation catalog", () => {
  it("has one operation per method and path, and one per service and name", () => {
    expect(new Set(OPERATIONS.map((op) => `${op.method} ${op.path}`)).size).toBe(OPERATIONS.length);
    expect(new Set(OPERATIONS.map((op) => `${op.service}.${op.name}`)).size).toBe(OPERATIONS.length);
    expect(OPERATION_ROUTES.flatMap((route) => Object.values(route.methods))).toHaveLength(OPERATIONS.length);
  });

  it("declares each path parameter as an id, and only those", () => {
    for (const op of OPERATIONS) {
      expect(Object.keys(op.params.shape), op.name).toEqual(pathParams(op.path));
      for (const schema of Object.values(op.params.shape)) {
        expect(schema.safeParse(1).success).toBe(true);
        expect(schema.safeParse(0).success).toBe(false);
      }
    }
  });

  it("forwards on <service>.<name>, except what the gateway answers", () => {
    for (const op of OPERATIONS) {
      expect(op.subject, op.name).toBe(op.service === "gateway" ? null : rpcSubject(op.service, op.name));
      expect(op.scope === null || (SCOPES as readonly string[]).includes(op.scope), op.name).toBe(true);
    }
    expect(operationsOf("tracking").map((op) => op.name)).toEqual(["history.list"]);
  });

  it("names every body and reply (the document's components), with a body only on POST and PATCH", () => {
    for (const op of OPERATIONS) {
      if (op.body) {
        expect(["POST", "PATCH"], op.name).toContain(op.method);
        expect(REQUEST_SCHEMAS.get(op.body.schema)?.id, op.name).toBeDefined();
        if (op.body.media !== "multipart/form-data") expect(op.body.media, op.name).toBe(BODY_MEDIA_TYPES[op.method]);
      }
      expect(op.reply === undefined, op.name).toBe(op.status === 204);
      if (op.reply) expect(REPLY_SCHEMAS.get(op.reply)?.id, op.name).toBeDefined();
    }
  });

  it("lists the pipeline's errors on every operation, and the body rules' where there is a body", () => {
    for (const op of OPERATIONS) {
      expect(op.errors, op.name).toEqual(expect.arrayContaining([...PIPELINE_ERRORS]));
      expect(BODY_ERRORS.every((t) => op.errors.includes(t)), op.name).toBe(op.body !== undefined);
    }
    // The spec's 422 for a key without organization: orgs/me and its settings only.
    expect(OPERATIONS.filter((op) => op.errors.includes("missing_org_context")).map((op) => op.path)).toEqual([
      "/api/v1/orgs/me",
      "/api/v1/orgs/me/settings",
      "/api/v1/orgs/me/settings",
    ]);
  });

  it("points each Location at a path of the API, and fills it in", () => {
    const paths = new Set(OPERATIONS.map((op) => op.path));
    for (const op of OPERATIONS.filter((o) => o.location)) {
      expect(op.status, op.name).toBe(op.method === "POST" && op.body?.media === "multipart/form-data" ? 202 : 201);
      expect(paths.has(op.location!.replace(/\{(\w+)\}/g, ":$1")), op.name).toBe(true);
    }
    expect(locationOf(operationNamed("catalog", "asset.tag.attach"), { asset_id: 7, tag_id: 9 })).toBe("/api/v1/assets/7/tags/9");
    expect(() => locationOf(operationNamed("catalog", "asset.create"), {})).toThrow(/asset_id/);
  });

  it("gives each route its Allow header: HEAD wherever GET is", () => {
    const route = (path: string) => OPERATION_ROUTES.find((r) => r.path === path)!;
    expect(route("/api/v1/assets/:asset_id").allow).toBe("GET, HEAD, PATCH, DELETE");
    expect(route("/api/v1/assets").allow).toBe("GET, HEAD, POST");
    expect(route("/api/v1/assets/:asset_id/tags/:tag_id").allow).toBe("DELETE");
  });
});
