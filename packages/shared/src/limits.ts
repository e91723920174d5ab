/**
 * Every size limit of the API, defined once (DECISIONS.md, "Sizes the spec
 * leaves open", plus the spec's own limits). The zod rules in the contracts,
 * the gateway's body decoding, the services' checks and the tests all read
 * these constants; nothing repeats a number.
 *
 * Lengths are counted in Unicode characters (code points), as JSON Schema's
 * maxLength counts them, so a client validating against docs/openapi.json
 * agrees with the service.
 */

/** Maximum request body (DECISIONS.md): larger bodies get 413 payload_too_large. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** `name` of assets and locations: 1..1000 characters (too_long, params.max_length). */
export const NAME_MAX_LENGTH = 1000;

/** `description`: 1..10000 characters when not null (too_long, params.max_length). */
export const DESCRIPTION_MAX_LENGTH = 10_000;

/** `metadata` as compact JSON (UTF-8 bytes): too_long with params.max_bytes. */
export const METADATA_MAX_BYTES = 64 * 1024;

/**
 * `metadata` nesting depth: the object itself is depth 1 (invalid_value with
 * params.max_depth). No other body field nests deeper than this either, so the
 * gateway applies it to the value of every top-level body member, before any
 * recursive walk of the body.
 */
export const METADATA_MAX_DEPTH = 32;

/** Tag requests in one create (`tags` on POST assets/locations): too_long, params.max_items. */
export const TAGS_PER_CREATE_MAX = 100;

/** Live tags of one asset or location in all: attaching beyond is 409 conflict. */
export const TAGS_PER_OWNER_MAX = 100;

/** `offset` on every list: too_large with params.max. */
export const OFFSET_MAX = 2147483647;

/** `q` on every list that has it: at most 255 characters (too_long), no NUL (invalid_value). */
export const Q_MAX_LENGTH = 255;

/** fields[] entries listed in one validation_error (detail still counts every one). */
export const FIELD_ERRORS_MAX = 100;

/** The number of Unicode code points of `text` (a lone surrogate counts as one). */
export function codePointLength(text: string): number {
  let pairs = 0;
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return text.length - pairs;
}

/** True when `text` is longer than `max` code points (cheap when it is short). */
export function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  if (text.length > 2 * max) return true;
  return codePointLength(text) > max;
}
