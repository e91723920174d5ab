/**
 * A service's database, opened one way by every service: its pool (sized by
 * config, watched by the metrics), the SQL client on it, its table
 * maintenance (db-maintenance.ts), a readiness check, and a close that ends
 * the pool. Shutdown stops `maintenance` with the workers and calls `close`
 * after NATS has drained (service.ts).
 */
import type pg from "pg";
import type { Logger } from "pino";
import { createPool } from "./db.ts";
import { startDbMaintenance } from "./db-maintenance.ts";
import type { Metrics } from "./metrics.ts";
import type { Worker } from "./service.ts";
import { createSqlClient, type SqlClient } from "./sql-client.ts";

export interface ServiceDatabase {
  pool: pg.Pool;
  sql: SqlClient;
  maintenance: Worker;
  /** For `/readyz`. */
  ping(): Promise<unknown>;
  close(): Promise<void>;
}

export function openServiceDatabase(options: {
  /** The Postgres schema the service owns; also the pool's metrics label. */
  schema: string;
  url: string;
  max: number;
  metrics: Metrics;
  logger: Logger;
  /** Prepared statements (sql-client.ts says when not to). Default true. */
  prepare?: boolean;
}): ServiceDatabase {
  const pool = createPool(options.url, options.max);
  const unwatch = options.metrics.watchPool(options.schema, pool);
  const sql = createSqlClient(pool, { prepare: options.prepare ?? true });
  return {
    pool,
    sql,
    maintenance: startDbMaintenance({ pool, schema: options.schema, logger: options.logger }),
    ping: () => pool.query("SELECT 1"),
    async close() {
      unwatch();
      await sql.$disconnect();
    },
  };
}
