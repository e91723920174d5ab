/**
 * One socket write per event-loop turn for a process's NATS connections, not
 * one per I/O callback. nats.js flushes its outbound buffer in a microtask,
 * that is at the end of each callback: in the gateway every HTTP request
 * arrives in a callback of its own, so each request was a socket write of its
 * own, and a loopback TCP send costs tens of microseconds here (16% of the
 * gateway's CPU at full GET load). The socket is corked at the first write of
 * a turn and uncorked in setImmediate, after the turn's I/O callbacks: what
 * they wrote leaves as one writev, in order, within the turn.
 *
 * The gateway only (connectNats' coalesceWrites): its turns are short. In a
 * service that parses consumer batches a turn can last tens of milliseconds,
 * and the cork held RPC replies behind it (all four processes corked: API
 * reads while ingesting p99 22 / 25 -> 55 / 42 ms, --quick, alternated).
 *
 * nats.js has no option for this, so its transport's `send` is wrapped, on the
 * transport's prototype: the transport a reconnect creates has it too. Should
 * a nats.js release no longer have that shape, nothing is wrapped and the
 * connection works as before (`coalesceNatsWrites` says so).
 */
import type { Socket } from "node:net";
import type { NatsConnection } from "@nats-io/transport-node";

interface TransportLike {
  socket?: Socket;
  send(frame: Uint8Array): void;
}

const WRAPPED = Symbol.for("whereabouts.nats.coalescedSend");
/** Sockets corked until this turn's setImmediate. */
const corked = new WeakSet<Socket>();

function transportOf(nc: NatsConnection): TransportLike | undefined {
  const transport = (nc as unknown as { protocol?: { transport?: TransportLike } }).protocol?.transport;
  return transport && typeof transport.send === "function" ? transport : undefined;
}

function corkForTurn(socket: Socket): void {
  if (corked.has(socket) || socket.destroyed) return;
  corked.add(socket);
  socket.cork();
  setImmediate(() => {
    corked.delete(socket);
    socket.uncork();
  });
}

/** Wraps the connection's transport (once per transport class); false when nats.js has no such transport. */
export function coalesceNatsWrites(nc: NatsConnection): boolean {
  const transport = transportOf(nc);
  if (!transport) return false;
  const proto = Object.getPrototypeOf(transport) as TransportLike & { [WRAPPED]?: true };
  if (proto[WRAPPED]) return true;
  if (typeof proto.send !== "function" || !("socket" in transport)) return false;
  const send = proto.send;
  proto.send = function (this: TransportLike, frame: Uint8Array): void {
    if (this.socket) corkForTurn(this.socket);
    send.call(this, frame);
  };
  proto[WRAPPED] = true;
  return true;
}

/** Whether the connection's current transport writes coalesced (tests). */
export function natsWritesCoalesced(nc: NatsConnection): boolean {
  const transport = transportOf(nc);
  return !!transport && !!(Object.getPrototypeOf(transport) as { [WRAPPED]?: true })[WRAPPED];
}
