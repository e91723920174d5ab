/**
 * Instants: the one RFC 3339 parser, the stored form (UTC, microseconds,
 * what timestamptz(6) holds) and the wire form (UTC, milliseconds: spec,
 * "Outbound"), in JavaScript and as SQL expressions.
 */

/** An instant: whole seconds since the epoch plus nanoseconds (0..999999999). */
export interface InstantNs {
  seconds: number;
  nanos: number;
}

const daysInMonth = (y: number, m: number) =>
  m === 2 ? (y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28) : m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;

/** Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm). */
function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function civilFromDays(z0: number): [number, number, number] {
  const zz = z0 + 719468;
  const era = Math.floor(zz / 146097);
  const doe = zz - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

/** The number written by `count` ASCII digits at `at`, or -1 when one of them is not a digit (or missing). */
function digitsAt(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - 48;
    if (!(d >= 0 && d <= 9)) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * The one RFC 3339 parser: text into an instant, or undefined when it is not
 * one (month 13, 30 February, hour 24, offset +24:00). The form: full date,
 * `T`, full time, any fraction, `Z` or ±hh:mm. Beyond nanoseconds the
 * fraction is truncated; `maxFractionDigits` refuses longer fractions where
 * the spec bounds them (history from/to and scans: 0 to 9 digits). Read
 * character by character: every event a consumer parses carries a dozen
 * instants, and a regular expression's match array cost the consumers a
 * tenth of their parsing.
 */
export function parseInstant(text: string, options: { maxFractionDigits?: number } = {}): InstantNs | undefined {
  if (text.length < 20) return undefined;
  if (text[4] !== "-" || text[7] !== "-" || (text[10] !== "T" && text[10] !== "t") || text[13] !== ":" || text[16] !== ":") return undefined;
  const year = digitsAt(text, 0, 4);
  const month = digitsAt(text, 5, 2);
  const day = digitsAt(text, 8, 2);
  const hour = digitsAt(text, 11, 2);
  const minute = digitsAt(text, 14, 2);
  const second = digitsAt(text, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return undefined;
  let at = 19;
  let nanos = 0;
  if (text[at] === ".") {
    const start = ++at;
    for (let d = text.charCodeAt(at) - 48; d >= 0 && d <= 9; d = text.charCodeAt(++at) - 48) if (at - start < 9) nanos = nanos * 10 + d;
    const fraction = at - start;
    if (fraction === 0) return undefined;
    if (options.maxFractionDigits !== undefined && fraction > options.maxFractionDigits) return undefined;
    for (let i = fraction; i < 9; i++) nanos *= 10;
  }
  let offset = 0;
  const zone = text[at];
  if (zone === "Z" || zone === "z") {
    if (at + 1 !== text.length) return undefined;
  } else if (zone === "+" || zone === "-") {
    if (at + 6 !== text.length || text[at + 3] !== ":") return undefined;
    const oh = digitsAt(text, at + 1, 2);
    const om = digitsAt(text, at + 4, 2);
    if (oh < 0 || om < 0 || oh > 23 || om > 59) return undefined;
    offset = (zone === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  } else return undefined;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const seconds = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset;
  return { seconds, nanos };
}

export const sameInstant = (a: InstantNs, b: InstantNs) => a.seconds === b.seconds && a.nanos === b.nanos;

const MIN_SECONDS = daysFromCivil(1, 1, 1) * 86400;
const MAX_SECONDS = daysFromCivil(10000, 1, 1) * 86400 - 1;

/**
 * The instant as UTC text with six fractional digits (truncated toward zero),
 * the form stored in timestamptz(6); undefined outside years 0001..9999.
 */
export function toMicrosText(instant: InstantNs): string | undefined {
  if (instant.seconds < MIN_SECONDS || instant.seconds > MAX_SECONDS) return undefined;
  const days = Math.floor(instant.seconds / 86400);
  const rest = instant.seconds - days * 86400;
  const [y, mo, d] = civilFromDays(days);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  const time = `${pad(Math.floor(rest / 3600))}:${pad(Math.floor((rest % 3600) / 60))}:${pad(rest % 60)}`;
  return `${pad(y, 4)}-${pad(mo)}-${pad(d)}T${time}.${pad(Math.floor(instant.nanos / 1000), 6)}Z`;
}

/** The default-value sentinels the spec rejects: 0001-01-01T00:00:00Z and the Unix epoch. */
export const SENTINEL_INSTANTS: InstantNs[] = [
  { seconds: MIN_SECONDS, nanos: 0 },
  { seconds: 0, nanos: 0 },
];


/** The spec's message for a value that is not an instant. */
export const rfc3339Message = (field: string) => `${field} must be an RFC 3339 timestamp`;

/* ------------------------------------------------------- scans and events */

/** An instant with microsecond precision: epoch milliseconds plus 0..999 µs. */
export interface MicroInstant {
  ms: number;
  micros: number;
}

/** RFC 3339 with 0..9 fractional digits, as a MicroInstant (truncated toward zero); null outside years 1..9999. */
export function parseRfc3339(text: string): MicroInstant | null {
  const instant = parseInstant(text, { maxFractionDigits: 9 });
  if (!instant || instant.seconds < MIN_SECONDS || instant.seconds > MAX_SECONDS) return null;
  const micros = Math.floor(instant.nanos / 1000);
  return { ms: instant.seconds * 1000 + Math.floor(micros / 1000), micros: micros % 1000 };
}

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ`: what Postgres stores without rounding. */
export const formatMicros = (instant: MicroInstant): string =>
  toMicrosText({ seconds: Math.floor(instant.ms / 1000), nanos: ((instant.ms % 1000 + 1000) % 1000) * 1_000_000 + instant.micros * 1000 })!;

/** Cuts fractional seconds to microseconds (toward zero), Postgres' precision; the offset is kept. */
export const toMicroPrecision = (instant: string): string => instant.replace(/(\.\d{6})\d+/, "$1");

/** Epoch microseconds of an RFC 3339 instant (any offset, any fraction), the key of newer-wins ordering. */
export function epochMicros(instant: string): number {
  const parsed = parseInstant(instant);
  if (!parsed) return Number.NaN;
  return parsed.seconds * 1_000_000 + Math.floor(parsed.nanos / 1000);
}

/** SQL: epoch microseconds of a timestamptz expression. */
export const epochMicrosSql = (expr: string) => `(extract(epoch FROM ${expr}) * 1000000)::bigint`;

/* -------------------------------------------------------------- the wire */

/** Outbound instants: RFC 3339 UTC with exactly three fractional digits. */
export const toWireTimestamp = (date: Date): string => date.toISOString();
export const toWireTimestampOrNull = (date: Date | null | undefined): string | null => (date ? toWireTimestamp(date) : null);
/** The wire form of epoch microseconds (truncated to milliseconds). */
export const wireFromMicros = (us: number): string => toWireTimestamp(new Date(Math.floor(us / 1000)));

/** SQL: a timestamptz column as wire text (`.NNNZ`). */
export const wireTimestampSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
/** SQL: a timestamptz column as stored-form text (`.NNNNNNZ`), e.g. for compare-by-instant echoes. */
export const microsTimestampSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
