/** Catalog process entry: config, then the shared process runner (ops server, NATS, streams, signals). */
import { runServiceProcess } from "@whereabouts/shared";
import { startCatalog } from "./app.ts";
import { loadCatalogConfig } from "./config.ts";

const config = loadCatalogConfig();
// Streams: publishes to CATALOG, consumes TRACKING.
await runServiceProcess({
  name: "catalog",
  config,
  schema: "catalog",
  start: ({ nc, logger, metrics }) =>
    startCatalog({ nc, logger, databaseUrl: config.databaseUrl, relayIntervalMs: config.CATALOG_RELAY_INTERVAL_MS, metrics }),
});
