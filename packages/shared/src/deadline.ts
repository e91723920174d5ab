/**
 * The caller's deadline of an RPC request. The gateway stops waiting for a
 * reply after its RPC timeout and answers 503; a write that commits after
 * that would be invisible to the client, whose retry then duplicates it. So
 * the request carries `deadline` (epoch ms, a little before the caller gives
 * up, leaving room for the commit's events and the reply to travel), the RPC
 * server runs each handler with it, and a write transaction checks it just
 * before COMMIT, rolling back with 503 when it has passed.
 *
 * Epoch milliseconds assume the gateway's and the services' clocks agree to
 * well within the grace below (NTP does that on any cluster).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { serviceUnavailable } from "./errors.ts";

/** Time kept back from the caller's timeout for the events and the reply after a commit. */
export function deadlineGraceMs(timeoutMs: number): number {
  return Math.min(1000, Math.floor(timeoutMs / 5));
}

/** The deadline to send with a request the caller will wait `timeoutMs` for. */
export function rpcDeadline(timeoutMs: number, now = Date.now()): number {
  return now + timeoutMs - deadlineGraceMs(timeoutMs);
}

const current = new AsyncLocalStorage<number>();

/** Runs an RPC handler with its caller's deadline (none: no deadline). */
export function runWithDeadline<T>(deadline: number | undefined, work: () => Promise<T>): Promise<T> {
  return deadline === undefined ? work() : current.run(deadline, work);
}

/** The deadline of the RPC request being served, if it sent one. */
export function currentDeadline(): number | undefined {
  return current.getStore();
}

/** Throws 503 service_unavailable when `deadline` has passed (nothing is committed). */
export function checkDeadline(deadline: number | undefined, now = Date.now()): void {
  if (deadline !== undefined && now >= deadline) {
    throw serviceUnavailable("The request took longer than its deadline; nothing was written, and a retry is safe", 1);
  }
}
