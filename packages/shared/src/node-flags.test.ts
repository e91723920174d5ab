import { describe, expect, it } from "vitest";
import { SERVICE_HEAP_MB, serviceNodeFlags } from "./node-flags.ts";

describe("serviceNodeFlags", () => {
  it("starts a service with source maps and the heap limit, unless NODE_OPTIONS sets its own", () => {
    expect(serviceNodeFlags({})).toEqual(["--enable-source-maps", `--max-old-space-size=${SERVICE_HEAP_MB}`]);
    expect(serviceNodeFlags({ NODE_OPTIONS: "--trace-warnings" })).toContain(`--max-old-space-size=${SERVICE_HEAP_MB}`);
    expect(serviceNodeFlags({ NODE_OPTIONS: "--max-old-space-size=512" })).toEqual(["--enable-source-maps"]);
  });
});
