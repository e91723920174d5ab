/**
 * The baseline the API cases are compared with: a bare Fastify server with a
 * pg pool answering GET /assets/:id with the same primary-key select of one
 * catalog.assets row, as JSON, on the same database. No auth, no NATS, no
 * validation beyond the id: the floor of what one HTTP + one query costs on
 * this machine. Run as its own process by baseline.ts.
 *
 * Env: DATABASE_URL, PORT, BASELINE_ORG_ID.
 */
import Fastify from "fastify";
import pg from "pg";

const databaseUrl = process.env.DATABASE_URL;
const port = Number(process.env.PORT);
const orgId = Number(process.env.BASELINE_ORG_ID);
if (!databaseUrl || !Number.isInteger(port) || !Number.isInteger(orgId)) {
  console.error("baseline-server: DATABASE_URL, PORT and BASELINE_ORG_ID are required");
  process.exit(2);
}

// The services' pools are 10 connections too.
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
const app = Fastify({ logger: false });

app.get("/healthz", async () => ({ ok: true }));

app.get<{ Params: { id: string } }>("/assets/:id", async (request, reply) => {
  const id = Number(request.params.id);
  if (!Number.isInteger(id) || id < 1 || id > 2147483647) return reply.code(400).send({ error: "bad id" });
  const { rows } = await pool.query(
    `SELECT a.id, a.external_key, a.name, a.description, a.is_active, a.metadata, a.valid_from, a.valid_to,
            ap.location_id, a.created_at, a.updated_at, a.deleted_at
       FROM catalog.assets a LEFT JOIN catalog.asset_positions ap ON ap.asset_id = a.id
      WHERE a.org_id = $1 AND a.id = $2 AND a.deleted_at IS NULL`,
    [orgId, id],
  );
  if (rows.length === 0) return reply.code(404).send({ error: "not found" });
  return { data: rows[0] };
});

const stop = async () => {
  await app.close();
  await pool.end();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());

await app.listen({ host: "127.0.0.1", port });
