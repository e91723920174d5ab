/**
 * `npm run -s reporting:rebuild`: rebuilds the reporting read model from the
 * CATALOG and TRACKING streams into fresh tables and swaps them in while the
 * service keeps answering. Prints one JSON line of figures on stdout and exits
 * 0, or a message on stderr and exits 1. Reads NATS_URL and DATABASE_URL
 * (REPORTING_DATABASE_URL overrides).
 */
import { pino } from "pino";
import { connectNats } from "@whereabouts/shared";
import { loadReportingConfig } from "./config.ts";
import { rebuildReadModel } from "./rebuild/rebuild-service.ts";
import { createReportingDb } from "./reporting-db.ts";

async function main(): Promise<void> {
  const config = loadReportingConfig();
  // Logs go to stderr: stdout carries only the JSON result.
  const logger = pino({ name: "reporting-rebuild", level: config.LOG_LEVEL }, pino.destination(2));
  const nc = await connectNats({ url: config.NATS_URL, name: "reporting-rebuild", logger });
  const db = createReportingDb(config.databaseUrl, 2);
  try {
    const figures = await rebuildReadModel({ nc, db, databaseUrl: config.databaseUrl, logger });
    process.stdout.write(`${JSON.stringify(figures)}\n`);
  } finally {
    await db.$disconnect();
    await nc.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`reporting rebuild failed: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
