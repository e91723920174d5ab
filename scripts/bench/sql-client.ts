/**
 * A pg client for the benchmark's own few queries. It listens for 'error'
 * so that a connection ended under it (the database dropped at teardown,
 * Postgres restarting) fails the query in progress instead of the process.
 */
import pg from "pg";

export async function connectSql(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}
