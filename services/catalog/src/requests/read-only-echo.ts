/**
 * PATCH rule 5: read-only fields echoed in a body are accepted when they equal
 * the current state and rejected with read_only otherwise; the message names
 * the write path. Instants are compared as instants (rule 6).
 */
import { parseInstant, sameInstant, type FieldError, type TagView } from "@whereabouts/shared";
import { isJsonObject, readOnlyError, type JsonObject } from "./body-parse.ts";

export interface EchoTarget {
  id: number;
  external_key: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: TagView[];
}

function instantEquals(sent: unknown, current: string | null): boolean {
  if (sent === null || current === null) return sent === current;
  if (typeof sent !== "string") return false;
  const a = parseInstant(sent);
  const b = parseInstant(current);
  return !!a && !!b && sameInstant(a, b);
}

const TAG_INSTANTS = new Set(["valid_from", "valid_to", "created_at", "updated_at"]);

function tagMatches(sent: JsonObject, tag: TagView): boolean {
  return Object.entries(sent).every(([key, value]) => {
    if (!(key in tag)) return false;
    const current = tag[key as keyof TagView];
    if (TAG_INSTANTS.has(key)) return instantEquals(value, current as string | null);
    return value === current;
  });
}

/** Each sent tag pairs with a distinct current tag on every key it carries. */
export function tagsEqual(sent: unknown, current: TagView[]): boolean {
  if (!Array.isArray(sent) || sent.length !== current.length) return false;
  const left = [...current];
  for (const item of sent) {
    if (!isJsonObject(item)) return false;
    const index = left.findIndex((tag) => tagMatches(item, tag));
    if (index === -1) return false;
    left.splice(index, 1);
  }
  return true;
}

/**
 * Checks id, external_key, created_at, updated_at, deleted_at and tags.
 * `skip` holds keys that already failed validation.
 */
export function checkEchoes(
  body: JsonObject,
  current: EchoTarget,
  resource: "assets" | "locations" | "scan-points",
  skip: Set<string>,
): FieldError[] {
  const base = `/api/v1/${resource}/${current.id}`;
  const has = (key: string) => Object.prototype.hasOwnProperty.call(body, key) && !skip.has(key);
  const errors: FieldError[] = [];
  if (has("id") && body.id !== current.id) {
    errors.push(readOnlyError("id", "id is read-only: it is server-managed and cannot be changed"));
  }
  if (has("external_key") && body.external_key !== current.external_key) {
    errors.push(readOnlyError("external_key", `external_key cannot be changed by PATCH; use POST ${base}/rename`));
  }
  for (const field of ["created_at", "updated_at"] as const) {
    if (has(field) && !instantEquals(body[field], current[field])) {
      errors.push(readOnlyError(field, `${field} is read-only: it is server-managed and cannot be changed`));
    }
  }
  if (has("deleted_at") && !instantEquals(body.deleted_at, current.deleted_at)) {
    errors.push(
      readOnlyError("deleted_at", `deleted_at is read-only: it is server-managed; use DELETE ${base} to delete the record`),
    );
  }
  if (has("tags") && !tagsEqual(body.tags, current.tags)) {
    errors.push(readOnlyError("tags", `tags are read-only here; use POST ${base}/tags and DELETE ${base}/tags/{tag_id}`));
  }
  return errors;
}

export const ASSET_LOCATION_READ_ONLY =
  "is read-only: asset location is collected through scan event ingestion and is not directly settable";
