/**
 * The setup every tracking test file shares: a stack with tracking alone (the
 * tests publish catalog's events themselves), one tenant, the catalog event
 * fixture and a SQL client on the file's database.
 */
import pg from "pg";
import { catalogFixture, type CatalogFixture } from "../services/tracking/src/testing/tracking-fixtures.ts";
import { startStack, type Stack } from "./harness.ts";

export interface TrackingContext {
  stack: Stack;
  cat: CatalogFixture;
  orgId: number;
  auth: Record<string, string>;
  sql: pg.Client;
  close(): Promise<void>;
}

export async function startTrackingContext(label: string): Promise<TrackingContext> {
  const stack = await startStack({ label, services: ["tracking"] });
  const { orgId, auth } = await stack.tenant();
  const sql = new pg.Client({ connectionString: stack.db.url });
  await sql.connect();
  return {
    stack,
    cat: catalogFixture(stack.nc),
    orgId,
    auth,
    sql,
    async close() {
      await sql.end();
      await stack.close();
    },
  };
}
