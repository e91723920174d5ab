/**
 * How long each service's durable consumers wait for a fuller batch, by what
 * they carry: scan data (SCANS; positions on TRACKING) linger
 * SCAN_DATA_LINGER_MS, since no read waits for them (ARCHITECTURE.md rule 4);
 * catalog events, which reporting's and history's reads may wait for
 * (read-your-writes), never wait longer than CONSUMER_LINGER_MS.
 */
import { describe, expect, it } from "vitest";
import { CONSUMER_LINGER_MS, SCAN_DATA_LINGER_MS, STREAMS, type ConsumerSpec } from "@whereabouts/shared";
import { POSITION_CONSUMER } from "../services/catalog/src/handlers/position-consumer.ts";
import { REPORTING_CONSUMERS } from "../services/reporting/src/handlers/stream-consumers.ts";
import { catalogConsumerSpec, scanConsumerSpec } from "../services/tracking/src/handlers/stream-consumers.ts";

const linger = (spec: ConsumerSpec) => spec.lingerMs ?? CONSUMER_LINGER_MS;
const sizes = { batchSize: 500, ackWaitMs: 30_000 };

const CONSUMERS: Record<string, ConsumerSpec> = {
  "tracking scans": scanConsumerSpec(sizes),
  "tracking catalog": catalogConsumerSpec(sizes),
  "catalog positions": POSITION_CONSUMER,
  "reporting catalog": REPORTING_CONSUMERS.catalog,
  "reporting tracking": REPORTING_CONSUMERS.tracking,
};

describe("consumers' linger", () => {
  it("scan data batches wait longer than catalog events, and the visibility target leaves room for three stages of it", () => {
    expect(SCAN_DATA_LINGER_MS).toBeGreaterThan(CONSUMER_LINGER_MS);
    // Scans -> tracking -> positions -> catalog or reporting: two lingers on any path; even three would be half the 1 s target.
    expect(SCAN_DATA_LINGER_MS * 3).toBeLessThan(1000 / 2);
  });

  it.each(Object.entries(CONSUMERS))("%s lingers by what its stream carries", (_name, spec) => {
    const scanData = spec.stream === STREAMS.SCANS.name || spec.stream === STREAMS.TRACKING.name;
    expect([STREAMS.SCANS.name, STREAMS.TRACKING.name, STREAMS.CATALOG.name]).toContain(spec.stream);
    if (scanData) expect(linger(spec)).toBe(SCAN_DATA_LINGER_MS);
    else expect(linger(spec)).toBeLessThanOrEqual(CONSUMER_LINGER_MS);
  });
});
