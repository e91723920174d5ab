import pg from "pg";
import fs from "node:fs";
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
const base = fs.readFileSync(process.env.SQLFILE ?? "/tmp/render-base.sql", "utf8");
const c = await pool.connect();
const pid = (await c.query("select pg_backend_pid() p")).rows[0].p;
fs.writeFileSync("/tmp/backend.pid", String(pid));
const N = Number(process.env.N ?? 4000);
const t = process.hrtime.bigint();
for (let i = 0; i < N; i++) {
  const st = 1 + ((i * 7919) % 19900);
  const ids = Array.from({ length: 50 }, (_, k) => st + k);
  await c.query({ name: "x", text: base, values: [1, `{${ids.join(",")}}`] });
}
console.log("ms/op", (Number(process.hrtime.bigint() - t) / 1e6 / N).toFixed(3));
c.release(); await pool.end();
