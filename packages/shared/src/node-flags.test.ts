import { describe, expect, it } from "vitest";
import { SERVICE_HEAP_MB, SERVICE_INITIAL_OLD_SPACE_MB, serviceImageFlags, serviceNodeFlags, TRACKING_SEMI_SPACE_MB } from "./node-flags.ts";

describe("serviceNodeFlags", () => {
  const heap = `--max-old-space-size=${SERVICE_HEAP_MB}`;
  const initial = `--initial-old-space-size=${SERVICE_INITIAL_OLD_SPACE_MB}`;

  it("starts a service with source maps, the heap limit and the initial old-generation limit", () => {
    expect(serviceNodeFlags("catalog", {})).toEqual(["--enable-source-maps", heap, initial]);
    expect(serviceNodeFlags("gateway", { NODE_OPTIONS: "--trace-warnings" })).toEqual(["--enable-source-maps", heap, initial]);
  });

  it("gives tracking a smaller young generation, in its image too", () => {
    const semi = `--max-semi-space-size=${TRACKING_SEMI_SPACE_MB}`;
    expect(serviceNodeFlags("tracking", {})).toEqual(["--enable-source-maps", heap, initial, semi]);
    expect(serviceImageFlags("tracking")).toEqual(["--enable-source-maps", initial, semi]);
    expect(serviceImageFlags("reporting")).toEqual(["--enable-source-maps", initial]);
    expect(serviceNodeFlags("tracking", { NODE_OPTIONS: "--max-semi-space-size=16" })).toEqual(["--enable-source-maps", heap, initial]);
  });

  it("leaves out a limit NODE_OPTIONS sets itself", () => {
    expect(serviceNodeFlags("catalog", { NODE_OPTIONS: "--max-old-space-size=512" })).toEqual(["--enable-source-maps", initial]);
    expect(serviceNodeFlags("catalog", { NODE_OPTIONS: "--initial-old-space-size=32" })).toEqual(["--enable-source-maps", heap]);
    // V8's other spelling: without this, the command line's flag came after it and won.
    expect(serviceNodeFlags("tracking", { NODE_OPTIONS: "--max_old_space_size=512 --max_semi_space_size=16" })).toEqual(["--enable-source-maps", initial]);
  });

  it("is a limit below the heap's", () => {
    expect(SERVICE_INITIAL_OLD_SPACE_MB).toBeLessThan(SERVICE_HEAP_MB);
  });
});
