/**
 * `ingest-smoothing`: the ingest-steady mix six times, three with smoothing
 * off (the default) and three with the organization's `smoothing_window_s`
 * at 60, interleaved (EXTENSIONS.md section 5), counting the history rows
 * each run wrote. A single run of this length varies by 20% from one to the
 * next here (a checkpoint, the other processes), about what smoothing
 * saves, so the rate is over all runs of each mode. The
 * target (issue 15): at least 10x fewer history rows, and faster. In this mix
 * one read in ten moves its asset, and a move always writes its row, so 10x
 * is the most any window can give here; the moves are counted as the mix is
 * built and shown beside the rows. The scan clock moves 1 ms per event, so
 * the six runs span 90 s of observation time: an asset read again in a late
 * run whose last row came from the first one (not read in between) is past
 * its 60 s window and rightly writes a row (a row or two more than the moves).
 */
import { atLeast, skippedRow, type Target } from "../bench-case.ts";
import type { BenchCase, IngestAccess } from "../bench-context.ts";
import { ingestDetails, ingestErrors, runMix, type IngestRun } from "../ingest-run.ts";
import { connectSql } from "../sql-client.ts";
import { patchOrgSettings } from "../org-settings.ts";

const READS_PER_SECOND = 50_000;
const SEQUENCE = ["off", "on", "on", "off", "on", "off"] as const;
const WINDOW_S = 60;
const target: Target = {
  text: "≥10x fewer history rows, faster (60 s window)",
  criteria: [atLeast("rows_ratio", 10), atLeast("speedup", 1)],
};


export const ingestSmoothingCase: BenchCase = {
  name: "ingest-smoothing",
  target,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("ingest-smoothing", target, "no NATS (set NATS_URL)")];
    if (!ctx.databaseUrl) return [skippedRow("ingest-smoothing", target, "no database (set BASELINE_DATABASE_URL)")];
    const ingest: IngestAccess = ctx.ingest;
    const sql = await connectSql(ctx.databaseUrl);
    // The fleet's rows only: each run's end marker (an asset kept aside) writes a row of its own.
    const fleetIds = ctx.fleet.assets.map((a) => a.id);
    const historyRows = async () =>
      Number(
        (await sql.query<{ n: string }>(`SELECT count(*)::bigint AS n FROM tracking.history WHERE org_id = $1 AND asset_id = ANY ($2::int[])`, [ctx.orgId, fleetIds]))
          .rows[0]!.n,
      );
    // Moves (a read at a location other than the asset's) are counted as the mix is built: each
    // writes a row whatever the window, so with smoothing on rows = moves is every repeat smoothed.
    const steady = async (): Promise<{ run: IngestRun; rows: number; moves: number }> => {
      const before = await historyRows();
      const movesBefore = ctx.fleet.moves;
      const run = await runMix(ctx, ingest, READS_PER_SECOND, (fleet) => fleet.steadyReads());
      return { run, rows: (await historyRows()) - before, moves: ctx.fleet.moves - movesBefore };
    };
    // Interleaved: a drift over the case (the stack warming up, another
    // process) weighs on both modes alike instead of favouring the later one.
    const runs: Record<"off" | "on", Array<{ run: IngestRun; rows: number; moves: number }>> = { off: [], on: [] };
    try {
      for (const mode of SEQUENCE) {
        await patchOrgSettings(ctx, { smoothing_window_s: mode === "on" ? WINDOW_S : 0 });
        runs[mode].push(await steady());
      }
    } finally {
      // Later cases (history, history-bytes) measure the spec's default: every read a row.
      await patchOrgSettings(ctx, { smoothing_window_s: 0 });
    }
    try {
      const total = (list: Array<{ run: IngestRun; rows: number; moves: number }>) => ({
        reads: list.reduce((n, x) => n + x.run.reads, 0),
        rows: list.reduce((n, x) => n + x.rows, 0),
        moves: list.reduce((n, x) => n + x.moves, 0),
        // Reads over the time they took, all runs of the mode together.
        readsPerSecond: list.reduce((n, x) => n + x.run.reads, 0) / list.reduce((n, x) => n + x.run.reads / Math.max(1, x.run.readsPerSecond), 0),
        // The stack's CPU per 1,000 reads, all runs of the mode together (steadier than the rate here).
        cpuPerThousand: list.every((x) => x.run.cpu)
          ? (list.reduce((n, x) => n + x.run.cpu!.total!, 0) * 1_000_000) / Math.max(1, list.reduce((n, x) => n + x.run.reads, 0))
          : undefined,
      });
      const off = total(runs.off);
      const on = total(runs.on);
      // Rows per read, so runs of slightly different sizes compare.
      const perRead = (x: { reads: number; rows: number }) => x.rows / Math.max(1, x.reads);
      const rowsRatio = perRead(on) > 0 ? perRead(off) / perRead(on) : Number.POSITIVE_INFINITY;
      const speedup = on.readsPerSecond / Math.max(1, off.readsPerSecond);
      const r = (n: number) => Math.floor(n * 100) / 100;
      const all = [...runs.off, ...runs.on];
      const each = (list: Array<{ run: IngestRun }>) => list.map((x) => Math.round(x.run.readsPerSecond).toLocaleString("en-US")).join(" and ");
      return [
        {
          name: "ingest-smoothing",
          status: "ok",
          rate: { value: on.readsPerSecond, unit: "reads/s" },
          metrics: {
            rows_ratio: r(rowsRatio),
            speedup: r(speedup),
            ...(off.cpuPerThousand && on.cpuPerThousand ? { cpu_ratio: r(off.cpuPerThousand / on.cpuPerThousand) } : {}),
          },
          non2xx: all.reduce((n, x) => n + x.run.visible.pollErrors, 0),
          errors: all.reduce((n, x) => n + ingestErrors(x.run), 0),
          target,
          note:
            `runs ${SEQUENCE.join(", ")}; off: ${off.reads.toLocaleString("en-US")} reads, ${off.rows.toLocaleString("en-US")} history rows, ${Math.round(off.readsPerSecond).toLocaleString("en-US")} reads/s (${each(runs.off)}); ` +
            `60 s window: ${on.reads.toLocaleString("en-US")} reads of which ${on.moves.toLocaleString("en-US")} moves, ${on.rows.toLocaleString("en-US")} rows, ${Math.round(on.readsPerSecond).toLocaleString("en-US")} reads/s (${each(runs.on)}) ` +
            `(${r(rowsRatio)}x fewer rows per read, ${r(speedup)}x the rate)` +
            (off.cpuPerThousand && on.cpuPerThousand
              ? `; stack CPU per 1,000 reads: off ${Math.round(off.cpuPerThousand)} ms, on ${Math.round(on.cpuPerThousand)} ms (${r(off.cpuPerThousand / on.cpuPerThousand)}x less)`
              : ""),
          details: {
            off: runs.off.map((x) => ({ ...ingestDetails(x.run), history_rows: x.rows, moves: x.moves })),
            window_60s: runs.on.map((x) => ({ ...ingestDetails(x.run), history_rows: x.rows, moves: x.moves })),
          },
        },
      ];
    } finally {
      await sql.end();
    }
  },
};
