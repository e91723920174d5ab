/**
 * `ingest-retention`: the ingest-steady mix while history retention deletes
 * (issue 15: "ingest and reads keep their targets while it runs"). The mix
 * runs once alone; then every fleet asset gets OLD_ROWS_PER_ASSET history
 * rows from 30 to 40 days ago (SQL), the organization's
 * `history_retention_days` goes to 7, and the same mix runs again while
 * tracking's retention pass (every second in the benchmark's stack, paced at
 * TRACKING_RETENTION_DUTY_PERCENT) removes them in its small batches; then
 * alone once more. The row says the ingest rate with retention, its ratio to
 * the runs alone (mean of the run before and the run after, so a drift over
 * the case weighs on both sides), and how many old rows were removed during
 * the run; retention is then switched off again. Each run is as long as
 * ingest-steady's (profile.sustainedIngestSeconds).
 */
import { atLeast, skippedRow, type Target } from "../bench-case.ts";
import type { BenchCase } from "../bench-context.ts";
import { ingestDetails, ingestErrors, ingestNote, runMix } from "../ingest-run.ts";
import { connectSql } from "../sql-client.ts";
import { patchOrgSettings } from "../org-settings.ts";

const READS_PER_SECOND = 50_000;
const OLD_ROWS_PER_ASSET = 20;
const target: Target = {
  text: "≥50,000 reads/s while retention deletes, ≥0.9x ingest alone",
  criteria: [atLeast("rate", READS_PER_SECOND), atLeast("vs_alone", 0.9)],
};


export const ingestRetentionCase: BenchCase = {
  name: "ingest-retention",
  target,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("ingest-retention", target, "no NATS (set NATS_URL)")];
    if (!ctx.databaseUrl) return [skippedRow("ingest-retention", target, "no database (set BASELINE_DATABASE_URL)")];
    const sql = await connectSql(ctx.databaseUrl);
    const fleetIds = ctx.fleet.assets.map((a) => a.id);
    // History keys are microseconds since the epoch * 16 + tie (tracking's packed key).
    const oldRows = async () =>
      Number(
        (
          await sql.query<{ n: string }>(
            `SELECT count(*)::bigint AS n FROM tracking.history
              WHERE org_id = $1 AND asset_id = ANY ($2::int[]) AND observed_key < (extract(epoch FROM now() - interval '7 days') * 1000000)::bigint * 16`,
            [ctx.orgId, fleetIds],
          )
        ).rows[0]!.n,
      );
    const ingest = ctx.ingest;
    // As long as ingest-steady's run (its target is the same rate), so the three compare with it and each other.
    const steady = () => runMix(ctx, ingest, READS_PER_SECOND, (fleet) => fleet.steadyReads(), ctx.profile.sustainedIngestSeconds);
    try {
      const aloneBefore = await steady();
      const seeded = Date.now();
      await sql.query("BEGIN");
      await sql.query(
        `INSERT INTO tracking.history (org_id, asset_id, observed_key, location_id)
         SELECT p.org_id, p.asset_id,
                (extract(epoch FROM now() - interval '40 days' + g * interval '12 hours') * 1000000)::bigint * 16, p.location_id
           FROM tracking.positions p, generate_series(1, $3::int) g
          WHERE p.org_id = $1 AND p.asset_id = ANY ($2::int[])
         ON CONFLICT DO NOTHING`,
        [ctx.orgId, fleetIds, OLD_ROWS_PER_ASSET],
      );
      // The rows count in the assets' history totals, as scans' rows do.
      await sql.query(
        `UPDATE tracking.positions SET history_count = history_count + $3 WHERE org_id = $1 AND asset_id = ANY ($2::int[])`,
        [ctx.orgId, fleetIds, OLD_ROWS_PER_ASSET],
      );
      await sql.query("COMMIT");
      await sql.query("ANALYZE tracking.history");
      const before = await oldRows();
      ctx.log(`ingest-retention: ${before.toLocaleString("en-US")} history rows older than 7 days in ${Date.now() - seeded} ms`);

      await patchOrgSettings(ctx, { history_retention_days: 7 });
      let run;
      let removed;
      try {
        run = await steady();
      } finally {
        // Counted before retention stops: what it removed while the mix ran.
        removed = before - (await oldRows());
        await patchOrgSettings(ctx, { history_retention_days: null });
      }
      const aloneAfter = await steady();
      const alone = (aloneBefore.readsPerSecond + aloneAfter.readsPerSecond) / 2;
      const vsAlone = Math.floor((run.readsPerSecond / Math.max(1, alone)) * 100) / 100;
      const rate = (x: { readsPerSecond: number }) => Math.round(x.readsPerSecond).toLocaleString("en-US");
      return [
        {
          name: "ingest-retention",
          status: "ok",
          rate: { value: run.readsPerSecond, unit: "reads/s" },
          metrics: { old_rows_removed: removed, vs_alone: vsAlone },
          non2xx: run.visible.pollErrors + aloneBefore.visible.pollErrors + aloneAfter.visible.pollErrors,
          errors: ingestErrors(run) + ingestErrors(aloneBefore) + ingestErrors(aloneAfter),
          target,
          note:
            `${ingestNote(run)}; retention removed ${removed.toLocaleString("en-US")} of ${before.toLocaleString("en-US")} old rows meanwhile; ` +
            `alone before and after: ${rate(aloneBefore)} and ${rate(aloneAfter)} reads/s (${vsAlone}x with retention)`,
          details: {
            ...ingestDetails(run),
            old_rows_before: before,
            old_rows_removed: removed,
            alone: [ingestDetails(aloneBefore), ingestDetails(aloneAfter)],
          },
        },
      ];
    } finally {
      await sql.end();
    }
  },
};
