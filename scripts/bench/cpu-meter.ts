/**
 * CPU time of the stack: each service process, every Postgres process and
 * every nats-server (utime + stime from /proc). On a saturated 2-core machine
 * whose speed changes from one minute to the next, the rate of a run varies
 * by 20-40%; the CPU a run's work took varies less (about 10%), so cases that compare
 * two modes (smoothing off and on) also report CPU per unit of work.
 */
import { execFileSync } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";

/** CPU seconds by group: the service names, "postgres", "nats". */
export type CpuSeconds = Record<string, number>;

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** utime + stime in ticks, and the command name, of one process; undefined when it is gone. */
async function processTicks(pid: number): Promise<{ ticks: number; comm: string } | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const fields = stat.slice(close + 2).split(" ");
    return { ticks: Number(fields[11]) + Number(fields[12]), comm };
  } catch {
    return undefined;
  }
}

export interface CpuMeter {
  /** CPU seconds so far per group (Postgres backends that exited meanwhile are not counted). */
  snapshot(): Promise<CpuSeconds>;
}

export function cpuMeter(services: ReadonlyMap<string, number>): CpuMeter {
  return {
    async snapshot() {
      const hz = clockTicks();
      const out: CpuSeconds = {};
      for (const [name, pid] of services) {
        const p = await processTicks(pid);
        if (p) out[name] = p.ticks / hz;
      }
      const own = new Set(services.values());
      for (const entry of await readdir("/proc")) {
        if (!/^\d+$/.test(entry) || own.has(Number(entry))) continue;
        const p = await processTicks(Number(entry));
        if (!p) continue;
        const group = p.comm === "postgres" ? "postgres" : p.comm === "nats-server" ? "nats" : undefined;
        if (group) out[group] = (out[group] ?? 0) + p.ticks / hz;
      }
      return out;
    },
  };
}

/** What each group used between two snapshots, and the total. */
export function cpuBetween(before: CpuSeconds, after: CpuSeconds): CpuSeconds {
  const out: CpuSeconds = {};
  let total = 0;
  for (const [group, seconds] of Object.entries(after)) {
    const used = Math.max(0, seconds - (before[group] ?? 0));
    out[group] = Math.round(used * 100) / 100;
    total += used;
  }
  out.total = Math.round(total * 100) / 100;
  return out;
}
