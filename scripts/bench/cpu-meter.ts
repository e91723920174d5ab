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

/** Each process's CPU seconds so far, by pid, with its group. */
export type CpuSnapshot = Map<number, { group: string; seconds: number }>;

export interface CpuMeter {
  /** CPU seconds so far per process of each group (Postgres backends that exited meanwhile are not counted). */
  snapshot(): Promise<CpuSnapshot>;
}

export function cpuMeter(services: ReadonlyMap<string, number>): CpuMeter {
  return {
    async snapshot() {
      const hz = clockTicks();
      const out: CpuSnapshot = new Map();
      for (const [name, pid] of services) {
        const p = await processTicks(pid);
        if (p) out.set(pid, { group: name, seconds: p.ticks / hz });
      }
      const own = new Set(services.values());
      for (const entry of await readdir("/proc")) {
        if (!/^\d+$/.test(entry) || own.has(Number(entry))) continue;
        const p = await processTicks(Number(entry));
        if (!p) continue;
        const group = p.comm === "postgres" ? "postgres" : p.comm === "nats-server" ? "nats" : undefined;
        if (group) out.set(Number(entry), { group, seconds: p.ticks / hz });
      }
      return out;
    },
  };
}

/**
 * What each group used between two snapshots, and the total: process by
 * process, so a Postgres backend that exits in between takes only its own
 * time out of the figure (summed per group, an exit made Postgres' use
 * negative, shown as 0); one that started in between counts whole.
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): CpuSeconds {
  const used: CpuSeconds = {};
  for (const [pid, { group, seconds }] of after) {
    const earlier = before.get(pid);
    const base = earlier?.group === group ? earlier.seconds : 0;
    used[group] = (used[group] ?? 0) + Math.max(0, seconds - base);
  }
  const out: CpuSeconds = {};
  let total = 0;
  for (const [group, seconds] of Object.entries(used)) {
    out[group] = Math.round(seconds * 100) / 100;
    total += seconds;
  }
  out.total = Math.round(total * 100) / 100;
  return out;
}
