/** Tracking process entry: config, then the shared process runner (ops server, NATS, streams, signals). */
import { runServiceProcess } from "@whereabouts/shared";
import { startTracking } from "./app.ts";
import { loadTrackingConfig } from "./config.ts";

const config = loadTrackingConfig();
// Streams: consumes SCANS and CATALOG, publishes to TRACKING and SCANS_DLQ.
await runServiceProcess({
  name: "tracking",
  config,
  schema: "tracking",
  start: ({ nc, logger, metrics }) => startTracking({ nc, logger, databaseUrl: config.databaseUrl, options: config.options, metrics }),
});
