/**
 * A raw HTTP/1.1 client on node:net, for requests no HTTP library would
 * send (malformed request lines, oversized heads, odd framing) and for what
 * libraries hide: exact bytes on the wire, whether a HEAD answer carried a
 * body, and whether the server closed a kept-alive connection.
 */
import { connect, type Socket } from "node:net";

export interface RawResponse {
  status: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  headers: Record<string, string>;
  /** Every header line as sent, for checks on duplicates. */
  headerLines: string[];
  body: Buffer;
}

export type ReadOutcome =
  | { kind: "response"; response: RawResponse }
  | { kind: "closed"; received: Buffer }
  | { kind: "reset"; received: Buffer }
  | { kind: "timeout"; received: Buffer }
  | { kind: "garbage"; received: Buffer; reason: string };

const HEAD_END = Buffer.from("\r\n\r\n");

export class RawConnection {
  /** Received bytes not yet read, as chunks (joined only when needed: large bodies arrive in many). */
  private chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private resetSeen = false;
  private waiter: (() => void) | undefined;
  readonly socket: Socket;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.size += chunk.length;
      this.wake();
    });
    socket.on("end", () => {
      this.ended = true;
      this.wake();
    });
    socket.on("close", () => {
      this.ended = true;
      this.wake();
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNRESET" || err.code === "EPIPE") this.resetSeen = true;
      this.ended = true;
      this.wake();
    });
  }

  static open(port: number, host = "127.0.0.1"): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host });
      socket.setNoDelay(true);
      socket.once("connect", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  private wake() {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Bytes received and not yet read as a response. */
  get pending(): Buffer {
    return this.joined();
  }

  private joined(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  send(bytes: Buffer | string): void {
    if (!this.ended) this.socket.write(bytes);
  }

  /** Waits for more data or the end, at most until `deadline`. */
  private async more(deadline: number): Promise<boolean> {
    if (this.ended) return false;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.waiter = resolve;
      timer = setTimeout(resolve, left);
    });
    clearTimeout(timer);
    return true;
  }

  /** Reads one response; `head` says the request was HEAD (no body follows). */
  async read(options: { head?: boolean; timeoutMs?: number } = {}): Promise<ReadOutcome> {
    const deadline = Date.now() + (options.timeoutMs ?? 10_000);
    /** Bytes the response needs in all, once its head says so. */
    let needed = 0;
    for (;;) {
      if (needed > 0 && this.size < needed && !this.ended) {
        if (await this.more(deadline)) continue;
        return this.giveUp();
      }
      const buffer = this.joined();
      const end = buffer.indexOf(HEAD_END);
      if (end !== -1) {
        const head = buffer.subarray(0, end).toString("latin1");
        const [statusLine, ...headerLines] = head.split("\r\n");
        const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(statusLine ?? "");
        if (!m) return { kind: "garbage", received: this.take(this.size), reason: `bad status line: ${statusLine}` };
        const headers: Record<string, string> = {};
        for (const line of headerLines) {
          const colon = line.indexOf(":");
          if (colon <= 0) return { kind: "garbage", received: this.take(this.size), reason: `bad header line: ${line}` };
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const status = Number(m[1]);
        const noBody = options.head || status === 204 || status === 304 || (status >= 100 && status < 200);
        let length = 0;
        if (!noBody) {
          if (headers["transfer-encoding"]) {
            return { kind: "garbage", received: this.take(this.size), reason: "chunked responses are not expected" };
          }
          if (headers["content-length"] !== undefined) length = Number(headers["content-length"]);
          else if (headers.connection?.toLowerCase() === "close") length = -1; // until close
        }
        const bodyStart = end + 4;
        if (length >= 0 && this.size >= bodyStart + length) {
          const bytes = this.take(bodyStart + length);
          return { kind: "response", response: { status, headers, headerLines, body: bytes.subarray(bodyStart) } };
        }
        if (length < 0 && this.ended) {
          const bytes = this.take(this.size);
          return { kind: "response", response: { status, headers, headerLines, body: bytes.subarray(bodyStart) } };
        }
        if (length >= 0) needed = bodyStart + length;
      }
      if (!(await this.more(deadline))) return this.giveUp();
    }
  }

  /** No (whole) response: why. */
  private giveUp(): ReadOutcome {
    const received = this.take(this.size);
    if (this.resetSeen) return { kind: "reset", received };
    if (this.ended) return { kind: "closed", received };
    return { kind: "timeout", received };
  }

  private take(n: number): Buffer {
    const all = this.joined();
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.size = rest.length;
    return out;
  }

  /** True when the server closes the connection within `timeoutMs`. */
  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) if (!(await this.more(deadline))) break;
    return this.ended;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A request's bytes: request line, headers (in order, as given), body. */
export function rawRequest(method: string, target: string, headers: Array<[string, string]>, body?: Buffer | string): Buffer {
  const lines = [`${method} ${target} HTTP/1.1`, ...headers.map(([k, v]) => `${k}: ${v}`)];
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(body);
  if (body !== undefined && !headers.some(([k]) => k.toLowerCase() === "content-length" || k.toLowerCase() === "transfer-encoding")) {
    lines.push(`content-length: ${payload.length}`);
  }
  return Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), payload]);
}
