/**
 * Replies never exceed the broker's max payload. Single records are bounded
 * by the size limits (limits.ts), but a page of the largest records can
 * still outgrow it: such a list page is cut to the rows that fit, and its
 * `limit` says so (the spec's list envelope: "limit: page size honored"), so
 * the client pages on from offset + limit and sees every row.
 */
interface ListBody {
  data: unknown[];
  limit: number;
  offset: number;
  total_count: number;
}

function isListBody(body: unknown): body is ListBody {
  if (body === null || typeof body !== "object") return false;
  const b = body as Record<string, unknown>;
  return Array.isArray(b.data) && typeof b.limit === "number" && typeof b.offset === "number" && typeof b.total_count === "number";
}

/** Room kept for the NATS headers of a reply (request id, traceparent). */
export function replyHeaderRoom(requestId: string): number {
  return 512 + 3 * requestId.length;
}

/**
 * The encoded reply body, made to fit in `maxBytes` when it is a list page
 * that does not: the longest prefix of its rows that fits, with `limit` set
 * to their number. Undefined when it cannot be made to fit (not a list, or
 * not even one row fits); the caller then answers an error instead.
 */
export function fitListReply(body: unknown, maxBytes: number): Uint8Array | undefined {
  if (!isListBody(body) || body.data.length === 0) return undefined;
  const base = Buffer.byteLength(JSON.stringify({ ...body, data: [] })) + 16;
  let size = base;
  let rows = 0;
  for (const item of body.data) {
    const next = size + Buffer.byteLength(JSON.stringify(item)) + 1;
    if (next > maxBytes) break;
    size = next;
    rows++;
  }
  if (rows === 0) return undefined;
  const encoded = Buffer.from(JSON.stringify({ ...body, data: body.data.slice(0, rows), limit: rows }));
  return encoded.length <= maxBytes ? encoded : undefined;
}
