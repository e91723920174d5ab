/** Subjects, streams and durable names: defined here once, used everywhere. */

export const SERVICES = ["catalog", "tracking", "reporting"] as const;
export type ServiceName = (typeof SERVICES)[number];

/** Request/reply: `<service>.<operation>`, queue group = service name. */
export const rpcSubject = (service: ServiceName, operation: string) => `${service}.${operation}`;
export const PING_OPERATION = "ping";

export const STREAMS = {
  CATALOG: { name: "CATALOG", subjects: ["catalog.events.>"] },
  TRACKING: { name: "TRACKING", subjects: ["tracking.events.>"] },
  /** DECISIONS.md: SCANS captures `scans.>`. Stream subjects may not overlap, so
   * SCANS_DLQ holds `scans.dlq.>` by sourcing it from SCANS, and the scan
   * consumer skips that branch. */
  SCANS: { name: "SCANS", subjects: ["scans.>"] },
  SCANS_DLQ: { name: "SCANS_DLQ", sourceFilter: "scans.dlq.>" },
} as const;

export const catalogEventSubject = (orgId: number, entity: string, verb: string) =>
  `catalog.events.${orgId}.${entity}.${verb}`;
export const trackingEventSubject = (orgId: number, entity: string, verb: string) =>
  `tracking.events.${orgId}.${entity}.${verb}`;
/** Core NATS (not a stream): catalog's read-your-writes watermark per organization. */
export const catalogWrittenSubject = (orgId: number) => `catalog.written.${orgId}`;
export const CATALOG_WRITTEN_ALL = "catalog.written.*";
export const scanSubject = (orgId: number | string, source: string) => `scans.${orgId}.${source}`;
export const scanDlqSubject = (orgId: number | string) => `scans.dlq.${orgId}`;

export const DURABLES = {
  trackingCatalog: "tracking-catalog",
  trackingScans: "tracking-scans",
  /** Catalog's consumer of `asset.moved` (filtered; the unfiltered "catalog-tracking" it replaced is removed at boot). */
  catalogTracking: "catalog-positions",
  reportingCatalog: "reporting-catalog",
  reportingTracking: "reporting-tracking",
} as const;
