/**
 * Rows as raw bytes: a query run as `COPY (...) TO STDOUT (FORMAT binary)`.
 *
 * node-postgres decodes every value of an ordinary result into a JS string.
 * For a value that is only passed on as it was stored (the outbox relay's
 * event JSON, published unread) that is a UTF-8 decode, a string the size of
 * the value, and an encode again on the way out: a bulk job's 128 MB of event
 * JSON cost the catalog 1.5 s of CPU in the decode alone, and much of its
 * garbage. In binary COPY a text value arrives as its UTF-8 bytes.
 *
 * COPY takes no parameters: callers inline literals they have checked
 * (copyLiteral). The query may be a SELECT, or an INSERT, UPDATE or DELETE
 * with RETURNING (the relay claims its rows that way).
 */
import type pg from "pg";

/** The binary COPY header's fixed signature (then flags and a header extension: PostgreSQL's COPY docs). */
const SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");

/** One row's fields, each its bytes as the server sent them in binary (text: UTF-8), or null. */
export type CopiedRow = Array<Buffer | null>;

/** A whole number (a safe integer, or a bigint's digits) as an SQL literal for a COPY statement, which takes no parameters; anything else throws. */
export function copyLiteral(value: number | string): string {
  const whole = typeof value === "number" ? Number.isSafeInteger(value) : /^-?\d{1,19}$/.test(value);
  if (!whole) throw new TypeError(`not a whole number: ${String(value)}`);
  return String(value);
}

/** Where a row of `fields` fields whose first starts at `at` ends, or undefined if `data` does not hold all of it. */
function rowEnd(data: Buffer, at: number, fields: number): number | undefined {
  let end = at;
  for (let i = 0; i < fields; i++) {
    if (end + 4 > data.length) return undefined;
    const length = data.readInt32BE(end);
    end += 4 + Math.max(length, 0); // -1: NULL, no bytes
    if (end > data.length) return undefined;
  }
  return end;
}

/**
 * Binary COPY data, read as it arrives: whole rows are taken from each
 * message, each field copied out once (a message is a view into the pg
 * parser's buffer, which it reuses for what arrives next); a row cut between
 * messages is kept until the rest comes. The server sends a row per message,
 * but the protocol lets it divide the data anywhere.
 */
export class BinaryCopyReader {
  private readonly rows: CopiedRow[] = [];
  private carry: Buffer | undefined;
  private headerRead = false;
  private ended = false;

  push(chunk: Buffer): void {
    const data = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = undefined;
    let at = 0;
    if (!this.headerRead) {
      if (data.length < SIGNATURE.length + 8) return this.keep(data, 0);
      if (!data.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error("not binary COPY data: the signature is missing");
      const extension = data.readUInt32BE(SIGNATURE.length + 4);
      if (data.length < SIGNATURE.length + 8 + extension) return this.keep(data, 0);
      at = SIGNATURE.length + 8 + extension;
      this.headerRead = true;
    }
    while (!this.ended && at + 2 <= data.length) {
      const fields = data.readInt16BE(at);
      if (fields === -1) {
        this.ended = true;
        return;
      }
      const end = rowEnd(data, at + 2, fields);
      if (end === undefined) break;
      const row: CopiedRow = new Array(fields);
      let field = at + 2;
      for (let i = 0; i < fields; i++) {
        const length = data.readInt32BE(field);
        field += 4;
        if (length === -1) row[i] = null;
        else {
          row[i] = Buffer.from(data.subarray(field, field + length));
          field += length;
        }
      }
      this.rows.push(row);
      at = end;
    }
    if (!this.ended && at < data.length) this.keep(data, at);
  }

  /** The data ended: every row is complete. */
  finish(): CopiedRow[] {
    if (!this.headerRead) throw new Error("not binary COPY data: the signature is missing");
    if (!this.ended || this.carry) throw new Error("binary COPY data ended inside a row");
    return this.rows;
  }

  private keep(data: Buffer, from: number): void {
    this.carry = Buffer.from(data.subarray(from));
  }
}

/** A pg Submittable: sends the COPY as a simple query and reads its data (BinaryCopyReader). */
class CopyOut {
  private readonly reader = new BinaryCopyReader();
  private error: Error | undefined;
  private settled = false;
  /**
   * Called once the copy settles, as pg's own queries do: with a `query_timeout` (a connection setting) pg wraps
   * it to clear its timer (on expiry it hands the query the timeout through handleError).
   */
  callback: (err?: Error) => void = () => undefined;
  constructor(
    private readonly text: string,
    private readonly settle: (err: Error | undefined, rows: CopiedRow[]) => void,
  ) {}
  submit(connection: { query(text: string): void }): void {
    connection.query(this.text);
  }
  handleCopyData(msg: { chunk: Buffer }): void {
    if (this.error) return;
    try {
      this.reader.push(msg.chunk);
    } catch (err) {
      // The statement runs on; its ReadyForQuery settles the call with this error.
      this.error = err as Error;
    }
  }
  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {
    this.fail(new Error("COPY TO expected, the server asked for COPY FROM data"));
  }
  /** A statement error is followed by ReadyForQuery; a connection error is not: settle now either way. */
  handleError(err: Error): void {
    this.fail(err);
  }
  handleReadyForQuery(): void {
    if (this.settled) return;
    let rows: CopiedRow[] = [];
    try {
      if (!this.error) rows = this.reader.finish();
    } catch (err) {
      this.error = err as Error;
    }
    this.settled = true;
    this.callback(this.error);
    this.settle(this.error, rows);
  }
  private fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.callback(err);
    this.settle(err, []);
  }
}

/**
 * Runs `query` (no parameters, no trailing semicolon) as binary COPY on `client`; its rows as bytes, in the order
 * the server sent them. Not on a pipelined connection (createPool's `pipeline`): pg refuses custom queries there.
 */
export function copyOutBinary(client: Pick<pg.PoolClient, "query">, query: string): Promise<CopiedRow[]> {
  return new Promise<CopiedRow[]>((resolve, reject) => {
    const copy = new CopyOut(`COPY (${query}) TO STDOUT (FORMAT binary)`, (err, rows) => (err ? reject(err) : resolve(rows)));
    // pg takes any object with submit() as a query (a Submittable) and hands it the protocol messages.
    (client as unknown as { query(submittable: CopyOut): unknown }).query(copy);
  });
}
