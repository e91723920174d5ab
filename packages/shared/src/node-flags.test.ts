import { describe, expect, it } from "vitest";
import { SERVICE_HEAP_MB, SERVICE_INITIAL_OLD_SPACE_MB, serviceNodeFlags } from "./node-flags.ts";

describe("serviceNodeFlags", () => {
  const heap = `--max-old-space-size=${SERVICE_HEAP_MB}`;
  const initial = `--initial-old-space-size=${SERVICE_INITIAL_OLD_SPACE_MB}`;

  it("starts a service with source maps, the heap limit and the initial old-generation limit", () => {
    expect(serviceNodeFlags({})).toEqual(["--enable-source-maps", heap, initial]);
    expect(serviceNodeFlags({ NODE_OPTIONS: "--trace-warnings" })).toEqual(["--enable-source-maps", heap, initial]);
  });

  it("leaves out a limit NODE_OPTIONS sets itself", () => {
    expect(serviceNodeFlags({ NODE_OPTIONS: "--max-old-space-size=512" })).toEqual(["--enable-source-maps", initial]);
    expect(serviceNodeFlags({ NODE_OPTIONS: "--initial-old-space-size=32" })).toEqual(["--enable-source-maps", heap]);
  });

  it("is a limit below the heap's", () => {
    expect(SERVICE_INITIAL_OLD_SPACE_MB).toBeLessThan(SERVICE_HEAP_MB);
  });
});
