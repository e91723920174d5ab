/**
 * The RPC envelope between the gateway and the services. The gateway is
 * generic: it authenticates, checks scopes and HTTP rules, then forwards the
 * request as this envelope on `<service>.<operation>`; the service answers
 * with an HTTP-shaped reply that the gateway renders as is.
 */
import { z } from "zod";

export const Principal = z.object({
  /** The API key; 0 when a user's session authenticated the request. */
  key_id: z.number().int(),
  /** The signed-in user, for session tokens (EXTENSIONS.md section 1). */
  user_id: z.number().int().optional(),
  org_id: z.number().int().nullable(),
  scopes: z.array(z.string()),
});
export type Principal = z.infer<typeof Principal>;

/**
 * Query keys with their values. Unlike z.record, which assigns each key to a
 * fresh object (so a `__proto__` key sets the prototype and vanishes), this
 * keeps every own key of the message, `__proto__` and `constructor`
 * included, so the service can reject it as an unknown query key.
 */
const QueryValues = z.unknown().transform((input, ctx): Record<string, string[]> => {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    ctx.addIssue({ code: "custom", message: "query must be an object" });
    return z.NEVER;
  }
  const entries = Object.entries(input);
  for (const [, values] of entries) {
    if (!Array.isArray(values) || !values.every((v) => typeof v === "string")) {
      ctx.addIssue({ code: "custom", message: "query values must be arrays of strings" });
      return z.NEVER;
    }
  }
  return Object.fromEntries(entries) as Record<string, string[]>;
});

export const RpcRequest = z.object({
  request_id: z.string(),
  principal: Principal,
  method: z.string(),
  /** The route pattern, e.g. `/api/v1/assets/:asset_id`. */
  route: z.string(),
  /** The request path as sent: the error envelope's `instance`. */
  path: z.string(),
  params: z.record(z.string(), z.string()),
  /** Every query key with all its values, in order: repeats are "any of". */
  query: QueryValues,
  /** Absent on GET, HEAD and DELETE (JSON drops an undefined key). */
  body: z.unknown().optional(),
  /**
   * The CATALOG stream sequence a read must see applied: the organization's
   * newest catalog write the gateway knows of (packages/shared/src/consistency.ts).
   */
  catalog_seq: z.number().int().nonnegative().optional(),
  /**
   * When the caller stops waiting (epoch ms). A write must not commit after
   * it: the caller has answered 503 by then, and a retry would duplicate it.
   */
  deadline: z.number().int().positive().optional(),
});
export type RpcRequest = z.infer<typeof RpcRequest>;

/**
 * A reply body already serialized as JSON text (records rendered by Postgres):
 * it travels and is sent to the client as is, never parsed and re-stringified.
 */
export class JsonText {
  constructor(readonly text: string) {}
}

export const RpcReply = z.object({
  status: z.number().int().min(100).max(599),
  headers: z.record(z.string(), z.string()).default({}),
  body: z.unknown().optional(),
  /**
   * When the caller stops waiting (epoch ms). A write must not commit after
   * it: the caller has answered 503 by then, and a retry would duplicate it.
   */
  deadline: z.number().int().positive().optional(),
});
export type RpcReply = z.infer<typeof RpcReply>;

/** Headers carried on every NATS message. */
export const HEADER_REQUEST_ID = "X-Request-ID";
export const HEADER_TRACEPARENT = "traceparent";
/**
 * On the wire an RPC reply is its HTTP status and headers in these NATS
 * headers, and its body as the message's data (JSON text; empty: no body), so
 * the gateway can send the bytes on without decoding them.
 */
export const HEADER_RPC_STATUS = "Rpc-Status";
export const HEADER_RPC_HEADERS = "Rpc-Headers";

/** A reply as the gateway receives it: the body still bytes. */
export interface RawRpcReply {
  status: number;
  headers: Record<string, string>;
  /** JSON text; undefined when the reply has no body. */
  payload: Uint8Array | undefined;
}
