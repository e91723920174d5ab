/** Wire pieces shared by every resource. */
import { z } from "zod";
import { JsonText } from "../rpc.ts";

/** Outbound instants: RFC 3339 UTC with exactly three fractional digits (rules/instant.ts writes them). */
export const Timestamp = z.string().meta({ format: "date-time", example: "2026-11-20T10:15:00.250Z" });

export const MAX_ID = 2147483647;
export const Id = z.number().int().min(1).max(MAX_ID);

export const TAG_TYPES = ["rfid", "ble", "barcode"] as const;
export const TagType = z.enum(TAG_TYPES);

export function ListEnvelope<T extends z.ZodType>(item: T) {
  return z.object({
    data: z.array(item),
    limit: z.number().int(),
    offset: z.number().int(),
    total_count: z.number().int(),
  });
}
export type ListEnvelope<T> = { data: T[]; limit: number; offset: number; total_count: number };

export const DataEnvelope = <T extends z.ZodType>(item: T) => z.object({ data: item });

/** `{ data: <record> }` around a record already rendered as JSON text. */
export const dataEnvelopeJson = (record: string): JsonText => new JsonText(`{"data":${record}}`);

export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 200;

export const OrgView = z.object({ id: Id, name: z.string(), created_at: Timestamp });
export type OrgView = z.infer<typeof OrgView>;

/** Text the database stores: no NUL characters (Postgres text cannot hold them). A superRefine for any string field. */
export const noNul = (field: string) => (value: string, ctx: z.core.$RefinementCtx<string>) => {
  if (value.includes("\u0000")) ctx.addIssue({ code: "custom", message: `${field} must not contain NUL characters` });
};
