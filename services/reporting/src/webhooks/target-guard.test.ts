import { describe, expect, it } from "vitest";
import { ValidationError } from "@whereabouts/shared";
import { createTargetGuard, refusedAddress, TargetRefusedError } from "./target-guard.ts";
import { createWebhookService } from "./webhook-service.ts";
import type { ReportingDb } from "../reporting-db.ts";

describe("the webhook target guard (SSRF)", () => {
  it("refuses private, loopback, link-local, metadata and reserved addresses; allows public ones", () => {
    for (const address of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1"]) {
      expect(refusedAddress(address), address).toBeDefined();
    }
    for (const address of ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"]) expect(refusedAddress(address), address).toBeUndefined();
  });

  it("checks literals and local names at save time", async () => {
    const guard = createTargetGuard(false);
    for (const url of ["http://127.0.0.1:8080/x", "https://[::1]/x", "http://169.254.169.254/latest/meta-data", "http://localhost/x", "http://metadata.google.internal/"]) {
      await expect(guard.check(url), url).rejects.toBeInstanceOf(TargetRefusedError);
    }
    await expect(guard.check("https://93.184.216.34/hook")).resolves.toBeUndefined();
  });

  it("checks the address actually dialled (a name that resolves to loopback)", async () => {
    const guard = createTargetGuard(false);
    const err = await new Promise<Error | null>((resolve) => guard.lookup!("localhost", { family: 0 }, (e) => resolve(e)));
    expect(err).toBeInstanceOf(TargetRefusedError);
  });

  it("WEBHOOK_ALLOW_PRIVATE lets everything through", async () => {
    const guard = createTargetGuard(true);
    await expect(guard.check("http://127.0.0.1:1/")).resolves.toBeUndefined();
    expect(guard.lookup).toBeUndefined();
  });

  it("a webhook on a private target is refused with 400, naming url", async () => {
    const service = createWebhookService({ db: {} as ReportingDb, guard: createTargetGuard(false) });
    const err = await service
      .create({ principal: { key_id: 1, org_id: 1, scopes: [] }, query: {}, params: {}, body: { url: "http://10.0.0.5/hook", types: ["asset.created"] } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).fields[0]).toMatchObject({ field: "url", code: "invalid_value" });
    expect((err as ValidationError).fields[0]!.message).toContain("10.0.0.5");
  });
});
