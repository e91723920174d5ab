/** Reporting process entry: config, then the shared process runner (ops server, NATS, streams, signals). */
import { runServiceProcess } from "@whereabouts/shared";
import { startReporting } from "./app.ts";
import { loadReportingConfig } from "./config.ts";

const config = loadReportingConfig();
// Streams: consumes CATALOG and TRACKING.
await runServiceProcess({
  name: "reporting",
  config,
  schema: "reporting",
  start: ({ nc, logger, metrics }) =>
    startReporting({
      nc,
      logger,
      databaseUrl: config.databaseUrl,
      catchUpTimeoutMs: config.REPORT_CATCHUP_TIMEOUT_MS,
      dbPoolMax: config.REPORTING_DB_POOL_MAX,
      metrics,
      events: {
        retentionS: config.EVENT_RETENTION_S,
        allowPrivateTargets: config.WEBHOOK_ALLOW_PRIVATE,
        concurrency: config.WEBHOOK_CONCURRENCY,
        perTarget: config.WEBHOOK_TARGET_CONCURRENCY,
        timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      },
    }),
});
