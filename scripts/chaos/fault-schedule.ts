/**
 * The faults `npm run chaos` injects while scans flow, one after another:
 * tracking, reporting and catalog each SIGKILLed (no shutdown code runs,
 * in-flight batches are lost mid-transaction) and started again after a
 * while; then the broker stopped (SIGTERM) and later SIGKILLed, each time
 * started again on the same port and JetStream store. After each, the stack
 * must answer ready again (the gateway's /readyz: every service answers its
 * ping) before the next fault; the time that took is the recovery figure.
 */
import type { RunningStack } from "../bench/private-stack.ts";

export type Fault =
  | { kind: "process"; process: "tracking" | "reporting" | "catalog" }
  | { kind: "broker"; signal: "SIGTERM" | "SIGKILL" };

export const FAULTS: readonly Fault[] = [
  { kind: "process", process: "tracking" },
  { kind: "process", process: "reporting" },
  { kind: "process", process: "catalog" },
  { kind: "broker", signal: "SIGTERM" },
  { kind: "broker", signal: "SIGKILL" },
];

export const describeFault = (f: Fault) => (f.kind === "process" ? `SIGKILL ${f.process}` : `broker ${f.signal === "SIGTERM" ? "stop" : "SIGKILL"}`);

export interface FaultTimings {
  /** How long the process (or broker) stayed down, as scheduled. */
  downMs: number;
  /** From the restart until the stack answered ready again. */
  recoveredMs: number;
}

export interface FaultRecord extends FaultTimings {
  fault: string;
  /** Seconds into the run when the fault struck. */
  atSecond: number;
}

export type FaultStack = Pick<RunningStack, "kill" | "start" | "nats" | "waitReady">;

/** One fault: strike, stay down `downMs`, restart, wait until ready. */
export async function injectFault(stack: FaultStack, fault: Fault, downMs: number): Promise<FaultTimings> {
  if (fault.kind === "process") await stack.kill(fault.process, "SIGKILL");
  else await stack.nats.stop(fault.signal);
  // The outage itself: work piles up meanwhile (this wait is the fault, not a synchronization).
  await new Promise((r) => setTimeout(r, downMs));
  const restarted = Date.now();
  if (fault.kind === "process") stack.start(fault.process);
  else await stack.nats.start();
  await stack.waitReady();
  return { downMs, recoveredMs: Date.now() - restarted };
}

/**
 * Every fault of `FAULTS`, `rounds` times, with `calmMs` of normal traffic
 * before each; `onStrike(n)` is called as the n-th (from 1) strikes.
 */
export async function runFaultSchedule(
  stack: FaultStack,
  o: {
    rounds: number;
    calmMs: number;
    processDownMs: number;
    brokerDownMs: number;
    startedAt: number;
    log: (m: string) => void;
    onStrike?: (n: number) => void;
  },
): Promise<FaultRecord[]> {
  const records: FaultRecord[] = [];
  for (let round = 0; round < o.rounds; round++) {
    for (const fault of FAULTS) {
      await new Promise((r) => setTimeout(r, o.calmMs));
      const atSecond = Math.round((Date.now() - o.startedAt) / 100) / 10;
      const name = describeFault(fault);
      o.log(`${name} at ${atSecond} s`);
      o.onStrike?.(records.length + 1);
      const timings = await injectFault(stack, fault, fault.kind === "process" ? o.processDownMs : o.brokerDownMs);
      o.log(`${name}: down ${timings.downMs} ms, ready again ${timings.recoveredMs} ms after the restart`);
      records.push({ fault: name, atSecond, ...timings });
    }
  }
  return records;
}
