/**
 * Catalog request bodies (assets, locations, tags, rename) and the value rules
 * behind them: external keys, RFC 3339 validity timestamps, metadata objects
 * and tag values. The catalog service parses with these, and the OpenAPI
 * document is generated from them.
 */
import { z } from "zod";
import { noNul, TAG_TYPES } from "./common.ts";
import { checkJsonValue } from "../json-guard.ts";
import { externalKey } from "../rules/external-key.ts";
import { parseInstant, rfc3339Message, sameInstant, SENTINEL_INSTANTS, toMicrosText } from "../rules/instant.ts";
import {
  DESCRIPTION_MAX_LENGTH,
  longerThan,
  METADATA_MAX_BYTES,
  METADATA_MAX_DEPTH,
  NAME_MAX_LENGTH,
  TAGS_PER_CREATE_MAX,
} from "../limits.ts";

type Ctx = z.core.$RefinementCtx<string>;

/**
 * valid_from / valid_to: RFC 3339 with any offset (converted to UTC), beyond
 * microseconds truncated, sentinels rejected (JSON null is the unset signal).
 */
export const validityTimestamp = (field: string) =>
  z
    .string()
    .superRefine((value, ctx) => {
      const instant = parseInstant(value);
      if (!instant || !toMicrosText(instant)) {
        ctx.addIssue({ code: "custom", message: rfc3339Message(field) });
        return;
      }
      if (SENTINEL_INSTANTS.some((s) => sameInstant(s, instant))) {
        const unset =
          field === "valid_to"
            ? "send JSON null to unset it (no expiry)"
            : "JSON null is the unset signal, and valid_from cannot be unset: omit it to keep the default";
        ctx.addIssue({
          code: "custom",
          message: `${field} must not be a default-value sentinel (0001-01-01T00:00:00Z or 1970-01-01T00:00:00Z); ${unset}`,
        });
      }
    })
    .meta({ format: "date-time", example: "2026-11-20T10:15:00.250Z" });

/** A read-only instant echoed in a PATCH body: compared by instant. */
export const echoedTimestamp = (field: string) =>
  z
    .string()
    .superRefine((value, ctx) => {
      if (!parseInstant(value)) ctx.addIssue({ code: "custom", message: rfc3339Message(field) });
    })
    .meta({ format: "date-time", description: `Read-only: accepted when it equals the current ${field}` });

/** valid_from / valid_to as every catalog create and patch body takes them (valid_to null: no expiry). */
export const validityFields = {
  valid_from: validityTimestamp("valid_from").optional(),
  valid_to: validityTimestamp("valid_to").nullable().optional(),
};

/* ----------------------------------------------------------------- text */

/** At most `max` characters (code points): too_long with params.max_length. */
const maxChars = (field: string, max: number) => (value: string, ctx: Ctx) => {
  if (longerThan(value, max)) {
    ctx.addIssue({
      code: "too_big",
      origin: "string",
      maximum: max,
      inclusive: true,
      message: `${field} must be at most ${max} characters`,
    });
  }
};

export const nameField = (field = "name") =>
  z
    .string()
    .min(1, { error: `${field} must not be empty` })
    .superRefine(maxChars(field, NAME_MAX_LENGTH))
    .superRefine(noNul(field))
    .meta({ maxLength: NAME_MAX_LENGTH });

export const descriptionField = () =>
  z
    .string()
    .min(1, { error: "description must not be empty (send null to clear it)" })
    .superRefine(maxChars("description", DESCRIPTION_MAX_LENGTH))
    .superRefine(noNul("description"))
    .meta({ maxLength: DESCRIPTION_MAX_LENGTH });

/**
 * Why a metadata object is refused, checked without recursion: nesting first
 * (so that nothing recursive ever sees a deep value), then NUL characters
 * (Postgres jsonb cannot hold them), then the compact JSON size.
 */
function metadataProblem(value: object): { message: string; params: Record<string, unknown> } | undefined {
  if (checkJsonValue({ metadata: value }).some((p) => p.kind === "depth")) {
    return {
      message: `metadata nests deeper than ${METADATA_MAX_DEPTH} levels`,
      params: { code: "invalid_value", max_depth: METADATA_MAX_DEPTH },
    };
  }
  const stack: unknown[] = [value];
  while (stack.length) {
    const item = stack.pop();
    if (typeof item === "string") {
      if (item.includes("\u0000")) return { message: "metadata must not contain NUL characters", params: { code: "invalid_value" } };
    } else if (Array.isArray(item)) {
      stack.push(...item);
    } else if (item !== null && typeof item === "object") {
      for (const [k, v] of Object.entries(item)) {
        if (k.includes("\u0000")) return { message: "metadata must not contain NUL characters", params: { code: "invalid_value" } };
        stack.push(v);
      }
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(value));
  if (bytes > METADATA_MAX_BYTES) {
    return {
      message: `metadata must be at most ${METADATA_MAX_BYTES} bytes as compact JSON (it is ${bytes})`,
      params: { code: "too_long", max_bytes: METADATA_MAX_BYTES },
    };
  }
  return undefined;
}

/**
 * metadata: a JSON object (a scalar, array, boolean or null is invalid_value),
 * at most METADATA_MAX_BYTES as compact JSON and METADATA_MAX_DEPTH deep.
 */
export const metadataField = () =>
  z
    .unknown()
    .superRefine((value, ctx) => {
      if (value === null) ctx.addIssue({ code: "custom", message: "metadata must be a JSON object; null is not allowed (send {} to clear it)" });
      else if (typeof value !== "object" || Array.isArray(value)) ctx.addIssue({ code: "custom", message: "metadata must be a JSON object" });
      else {
        const problem = metadataProblem(value);
        if (problem) ctx.addIssue({ code: "custom", message: problem.message, params: problem.params });
      }
    })
    .meta({
      type: "object",
      additionalProperties: true,
      description: `Arbitrary JSON object; replaced whole on PATCH. At most ${METADATA_MAX_BYTES} bytes as compact JSON, nesting depth at most ${METADATA_MAX_DEPTH}`,
    });

/* ----------------------------------------------------------------- tags */

export const TAG_VALUE_MAX = 255;
/** C0 controls other than tab (9), newline (10) and carriage return (13), and DEL (127). */
const forbiddenTagChar = (value: string) =>
  [...value].some((c) => {
    const code = c.codePointAt(0)!;
    return (code < 32 && code !== 9 && code !== 10 && code !== 13) || code === 127;
  });

export const tagValueField = () =>
  z
    .string()
    .superRefine((value, ctx) => {
      const length = [...value].length;
      if (length < 1) {
        ctx.addIssue({ code: "too_small", origin: "string", minimum: 1, inclusive: true, message: "value must not be empty" });
      } else if (length > TAG_VALUE_MAX) {
        ctx.addIssue({
          code: "too_big",
          origin: "string",
          maximum: TAG_VALUE_MAX,
          inclusive: true,
          message: `value must be at most ${TAG_VALUE_MAX} characters`,
        });
      } else if (forbiddenTagChar(value)) {
        ctx.addIssue({ code: "custom", message: "value must not contain control characters other than tab, newline and carriage return" });
      }
    })
    .meta({ minLength: 1, maxLength: TAG_VALUE_MAX });

export const tagTypeField = () =>
  z
    .string()
    .superRefine((value, ctx) => {
      if (!(TAG_TYPES as readonly string[]).includes(value)) {
        ctx.addIssue({
          code: "invalid_value",
          values: [...TAG_TYPES],
          message: `tag_type must be one of ${TAG_TYPES.join(", ")}`,
        });
      }
    })
    .meta({ enum: [...TAG_TYPES], description: "Open enumeration: rfid, ble, barcode today" });

export const TagRequest = z
  .object({
    tag_type: tagTypeField(),
    value: tagValueField(),
    is_active: z.boolean().optional(),
    ...validityFields,
  })
  .strict()
  .meta({ id: "TagRequest" });
export type TagRequest = z.infer<typeof TagRequest>;

/** Tag requests sent with a create: at most TAGS_PER_CREATE_MAX (too_long, params.max_items). */
const createTags = () =>
  z.array(TagRequest).max(TAGS_PER_CREATE_MAX, { error: `tags must hold at most ${TAGS_PER_CREATE_MAX} tag requests` });

/* ---------------------------------------------------------------- assets */

/** The optional details assets and locations share, on create and on patch alike. */
const detailFields = {
  description: descriptionField().nullable().optional(),
  is_active: z.boolean().optional(),
};

const readOnlyEchoes = {
  id: z.number().optional().meta({ description: "Read-only: accepted when it equals the current id" }),
  external_key: externalKey("external_key")
    .optional()
    .meta({ description: "Read-only on PATCH (use POST .../rename): accepted when it equals the current key" }),
  created_at: echoedTimestamp("created_at").optional(),
  updated_at: echoedTimestamp("updated_at").optional(),
  deleted_at: echoedTimestamp("deleted_at").nullable().optional(),
  tags: z
    .array(z.record(z.string(), z.unknown()))
    .optional()
    .meta({ description: "Read-only (use the tags subresource): accepted when it equals the current tags" }),
};

export const AssetCreateRequest = z
  .object({
    external_key: externalKey("external_key").optional().meta({ description: "Minted as ASSET-NNNN when absent" }),
    name: nameField(),
    ...detailFields,
    metadata: metadataField().optional(),
    ...validityFields,
    tags: createTags().optional(),
  })
  .strict()
  .meta({ id: "AssetCreateRequest" });
export type AssetCreateRequest = z.infer<typeof AssetCreateRequest>;

export const AssetPatchRequest = z
  .object({
    name: nameField().optional(),
    ...detailFields,
    metadata: metadataField().optional(),
    ...validityFields,
    ...readOnlyEchoes,
    location_id: z
      .number()
      .int()
      .nullable()
      .optional()
      .meta({ description: "Read-only (scan data): accepted when it equals the current location_id" }),
    location_external_key: externalKey("location_external_key")
      .nullable()
      .optional()
      .meta({ description: "Read-only (scan data): accepted when it equals the current location_external_key" }),
  })
  .strict()
  .meta({ id: "AssetPatchRequest" });
export type AssetPatchRequest = z.infer<typeof AssetPatchRequest>;

/* ------------------------------------------------------------- locations */

/** Zones and dwell limits (EXTENSIONS.md section 5): optional fields, additive within v1. */
const zoneFields = {
  is_zone: z.boolean().optional().meta({ description: "A zone counts its subtree as inside: zone.entered / zone.exited (default false)" }),
  max_dwell_s: z
    .number()
    .int({ error: "max_dwell_s must be a whole number of seconds" })
    .min(0, { error: "max_dwell_s must be at least 0" })
    .max(2147483647, { error: "max_dwell_s must be at most 2147483647" })
    .nullable()
    .optional()
    .meta({ description: "asset.dwell_exceeded when an asset stays at this location longer (seconds; null: no limit, the default)" }),
};

/** A location's parent, by id or by external key, on create and on patch alike. */
const parentFields = {
  parent_id: z.number().int().min(1).max(2147483647).nullable().optional(),
  parent_external_key: externalKey("parent_external_key").nullable().optional(),
};

export const LocationCreateRequest = z
  .object({
    external_key: externalKey("external_key").optional().meta({ description: "Minted as LOC-NNNN when absent" }),
    name: nameField(),
    ...detailFields,
    ...parentFields,
    ...zoneFields,
    ...validityFields,
    tags: createTags().optional(),
  })
  .strict()
  .meta({ id: "LocationCreateRequest" });
export type LocationCreateRequest = z.infer<typeof LocationCreateRequest>;

export const LocationPatchRequest = z
  .object({
    name: nameField().optional(),
    ...detailFields,
    ...parentFields,
    ...zoneFields,
    ...validityFields,
    ...readOnlyEchoes,
  })
  .strict()
  .meta({ id: "LocationPatchRequest" });
export type LocationPatchRequest = z.infer<typeof LocationPatchRequest>;

/* ---------------------------------------------------------------- rename */

export const RenameRequest = z
  .object({ external_key: externalKey("external_key") })
  .strict()
  .meta({ id: "RenameRequest" });
export type RenameRequest = z.infer<typeof RenameRequest>;
