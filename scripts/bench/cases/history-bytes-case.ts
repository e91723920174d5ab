/**
 * `history-bytes`: bytes per history row, indexes included:
 * pg_total_relation_size('tracking.history') / rows, as the table stands
 * after the run's scans (no VACUUM first; the table is insert-only).
 */
import { atMost, skippedRow } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";
import { connectSql } from "../sql-client.ts";

const target = { text: "≤100 B/row", criteria: [atMost("bytes_per_row", 100)] };

interface SizeRow {
  rows: string;
  total: string;
  heap: string;
  indexes: string;
}

export const historyBytesCase: BenchCase = {
  name: "history-bytes",
  target,
  async run(ctx) {
    if (!ctx.databaseUrl) return [skippedRow("history-bytes", target, "no database (set BASELINE_DATABASE_URL)")];
    const client = await connectSql(ctx.databaseUrl);
    try {
      const { rows } = await client.query<SizeRow>(
        `SELECT (SELECT count(*) FROM tracking.history)::bigint AS rows,
                pg_total_relation_size('tracking.history') AS total,
                pg_relation_size('tracking.history') AS heap,
                pg_indexes_size('tracking.history') AS indexes`,
      );
      const size = rows[0]!;
      const n = Number(size.rows);
      if (n === 0) return [skippedRow("history-bytes", target, "no history rows")];
      const perRow = (bytes: string) => Math.round((Number(bytes) / n) * 10) / 10;
      const bytesPerRow = perRow(size.total);
      return [
        {
          name: "history-bytes",
          status: "ok",
          summary: `${bytesPerRow} B/row (${n.toLocaleString("en-US")} rows)`,
          metrics: { bytes_per_row: bytesPerRow },
          non2xx: 0,
          errors: 0,
          target,
          details: { rows: n, total_bytes: Number(size.total), heap_bytes_per_row: perRow(size.heap), index_bytes_per_row: perRow(size.indexes) },
        },
      ];
    } finally {
      await client.end();
    }
  },
};
