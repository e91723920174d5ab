/**
 * JSON bodies a client can send but the service must refuse before anything
 * walks them recursively or stores them altered:
 *
 * - nesting deeper than METADATA_MAX_DEPTH in any top-level member (a deep
 *   body would overflow the stack of JSON.stringify, zod or Postgres);
 * - a lone UTF-16 surrogate in a string or key (it would be stored as U+FFFD);
 * - a number beyond the double range such as 1e400 (JSON.parse makes it
 *   Infinity, which JSON.stringify turns into null: the write would clear or
 *   move something the client never asked for).
 *
 * `scanJsonText` finds them in the raw text with one iterative pass (the
 * gateway, before JSON.parse); `checkJsonValue` in a parsed value with an
 * explicit stack (the services, before any schema). Neither recurses.
 */
import { badRequest, fieldError, ValidationError, type AppError, type FieldError } from "./errors.ts";
import { METADATA_MAX_DEPTH } from "./limits.ts";
import { DETAIL_WRONG_TOP_LEVEL } from "./validation.ts";

export interface JsonProblem {
  kind: "depth" | "lone_surrogate" | "non_finite";
  /** The field as fields[] names it (`metadata.a[2].b`); "" for the top level. */
  field: string;
}

const MAX_PROBLEMS = 20;

/** A UTF-16 surrogate without its other half (code units, no `u` flag on purpose). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");

/** True when `text` is not Unicode text (holds a lone surrogate). */
export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);

/** `text` with each lone surrogate replaced by U+FFFD, for messages. */
export const wellFormed = (text: string): string => text.replace(LONE_SURROGATES, "\uFFFD");

type Segment = string | number;

/** `a.b[2].c`, the form issuesToFields uses. */
function formatPath(segments: readonly Segment[]): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else out += out === "" ? s : `.${s}`;
  }
  return wellFormed(out);
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;
const hex4 = (text: string, at: number) => (/^[0-9a-fA-F]{4}$/.test(text.slice(at, at + 4)) ? parseInt(text.slice(at, at + 4), 16) : -1);

interface Frame {
  object: boolean;
  /** Objects: the current member's key; arrays: the current index. */
  key: Segment;
  expectKey: boolean;
}

/**
 * One pass over JSON text. Tracks strings, escapes, brackets and number
 * tokens only; syntax errors are left to JSON.parse, which runs afterwards.
 */
export function scanJsonText(text: string, maxMemberDepth = METADATA_MAX_DEPTH): JsonProblem[] {
  const problems: JsonProblem[] = [];
  const frames: Frame[] = [];
  const maxFrames = maxMemberDepth + 1;
  let hidden = 0; // containers deeper than maxFrames, not tracked
  let topObject = false;
  const deepReported = new Set<Segment>();
  const add = (kind: JsonProblem["kind"], segments: Segment[]) => {
    if (problems.length < MAX_PROBLEMS) problems.push({ kind, field: formatPath(segments) });
  };
  const path = (): Segment[] => frames.map((f) => f.key);
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (frames.length === 0 && hidden === 0) topObject = c === 0x7b;
      if (frames.length >= maxFrames) {
        if (hidden === 0) {
          const top = frames[0]?.key ?? "";
          const segment = topObject ? top : "";
          if (!deepReported.has(segment)) {
            deepReported.add(segment);
            add("depth", segment === "" ? [] : [segment]);
          }
        }
        hidden++;
      } else {
        frames.push({ object: c === 0x7b, key: c === 0x7b ? "" : 0, expectKey: c === 0x7b });
      }
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (hidden > 0) hidden--;
      else frames.pop();
      i++;
    } else if (c === 0x2c /* , */) {
      const frame = hidden === 0 ? frames[frames.length - 1] : undefined;
      if (frame) {
        if (frame.object) frame.expectKey = true;
        else frame.key = (frame.key as number) + 1;
      }
      i++;
    } else if (c === 0x22 /* " */) {
      const start = i;
      i++;
      let lone = false;
      let escaped = false;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x22) break;
        if (d === 0x5c /* \ */) {
          escaped = true;
          if (text.charCodeAt(i + 1) === 0x75 /* u */) {
            const unit = hex4(text, i + 2);
            if (isHigh(unit)) {
              const next = text.charCodeAt(i + 6) === 0x5c && text.charCodeAt(i + 7) === 0x75 ? hex4(text, i + 8) : -1;
              if (isLow(next)) i += 12;
              else {
                lone = true;
                i += 6;
              }
              continue;
            }
            if (isLow(unit)) lone = true;
            i += 6;
            continue;
          }
          i += 2;
          continue;
        }
        if (isHigh(d)) {
          if (isLow(text.charCodeAt(i + 1))) i += 2;
          else {
            lone = true;
            i++;
          }
          continue;
        }
        if (isLow(d)) lone = true;
        i++;
      }
      const end = i;
      i++;
      const frame = hidden === 0 ? frames[frames.length - 1] : undefined;
      if (frame?.object && frame.expectKey) {
        frame.expectKey = false;
        const raw = text.slice(start, end + 1);
        let key = raw.slice(1, -1);
        if (escaped) {
          try {
            key = JSON.parse(raw) as string;
          } catch {
            // Left to JSON.parse.
          }
        }
        frame.key = key;
        if (lone) add("lone_surrogate", path());
      } else if (lone) {
        add("lone_surrogate", hidden === 0 ? path() : frames[0] ? [frames[0].key] : []);
      }
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      let exponent = false;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x65 || d === 0x45) exponent = true;
        else if (!(d === 0x2b || d === 0x2d || d === 0x2e || (d >= 0x30 && d <= 0x39))) break;
        i++;
      }
      if (exponent || i - start > 300) {
        if (!Number.isFinite(Number(text.slice(start, i)))) {
          add("non_finite", hidden === 0 ? path() : frames[0] ? [frames[0].key] : []);
        }
      }
    } else {
      i++;
    }
  }
  return problems;
}

/**
 * The same checks over a parsed value (the service's side: its RPC message
 * was parsed by JSON.parse, which does not recurse in V8).
 */
export function checkJsonValue(body: unknown, maxMemberDepth = METADATA_MAX_DEPTH): JsonProblem[] {
  const problems: JsonProblem[] = [];
  const add = (kind: JsonProblem["kind"], segments: readonly Segment[]) => {
    if (problems.length < MAX_PROBLEMS) problems.push({ kind, field: formatPath(segments) });
  };
  // Each entry: a value, its path, and its depth below the top-level member (0 = the member itself).
  const stack: Array<{ value: unknown; path: Segment[]; depth: number }> = [];
  if (body !== null && typeof body === "object" && !Array.isArray(body)) {
    for (const [key, value] of Object.entries(body)) {
      if (hasLoneSurrogate(key)) add("lone_surrogate", [key]);
      stack.push({ value, path: [key], depth: 0 });
    }
  } else {
    stack.push({ value: body, path: [], depth: 0 });
  }
  while (stack.length && problems.length < MAX_PROBLEMS) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === "string") {
      if (hasLoneSurrogate(value)) add("lone_surrogate", path);
    } else if (typeof value === "number") {
      if (!Number.isFinite(value)) add("non_finite", path);
    } else if (value !== null && typeof value === "object") {
      if (depth + 1 > maxMemberDepth) {
        add("depth", path.slice(0, 1));
        continue;
      }
      if (Array.isArray(value)) {
        for (let k = value.length - 1; k >= 0; k--) stack.push({ value: value[k], path: [...path, k], depth: depth + 1 });
      } else {
        for (const [key, v] of Object.entries(value)) {
          if (hasLoneSurrogate(key)) add("lone_surrogate", [...path, key]);
          stack.push({ value: v, path: [...path, key], depth: depth + 1 });
        }
      }
    }
  }
  return problems;
}

/**
 * The spec's error for what the checks found, or undefined when none.
 *
 * A number beyond the double range is a bad_request naming the field: the
 * spec's error table gives bad_request for an undecodable request (the value
 * cannot be decoded into a JSON number the service can hold) and for a wrong
 * JSON type for a field, the same family; validation_error is for parsed
 * requests. Depth and lone surrogates are validation_error invalid_value
 * (DECISIONS.md: "Sizes the spec leaves open" and the paragraph after it).
 * A top-level value that is not an object is the wrong top-level type.
 */
export function jsonProblemsError(problems: readonly JsonProblem[]): AppError | undefined {
  if (problems.length === 0) return undefined;
  if (problems.some((p) => p.field === "")) return badRequest(DETAIL_WRONG_TOP_LEVEL);
  const nonFinite = problems.find((p) => p.kind === "non_finite");
  if (nonFinite) {
    return badRequest(`Field '${nonFinite.field}' holds a number outside the range of a double-precision number`);
  }
  const fields: FieldError[] = problems.map((p) =>
    p.kind === "depth"
      ? fieldError(p.field, "invalid_value", `${p.field} nests deeper than ${METADATA_MAX_DEPTH} levels`, {
          max_depth: METADATA_MAX_DEPTH,
        })
      : fieldError(p.field, "invalid_value", `${p.field} contains a lone UTF-16 surrogate; strings must be Unicode text`),
  );
  return new ValidationError(fields);
}
