/**
 * Users' secrets (EXTENSIONS.md section 1): passwords hashed with scrypt
 * (node:crypto), session tokens and CSRF tokens random, stored only as
 * SHA-256 hashes, as API keys are.
 */
import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { hashApiKey } from "./api-key.ts";

export const MIN_PASSWORD_LENGTH = 12;
/** N=2^15 (about 32 MiB and tens of milliseconds per hash): OWASP's floor for scrypt. */
const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_LENGTH = 32;

function scrypt(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scryptCallback(password.normalize("NFC"), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** `scrypt$N$r$p$<salt>$<hash>` (base64url). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT);
  return ["scrypt", SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const N = Number(n);
  const key = await scrypt(password, Buffer.from(salt, "base64url"), { N, r: Number(r), p: Number(p), maxmem: 256 * N * Number(r) + 1024 * 1024 });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash to compare against when the email is unknown, so both failures take as long. */
let decoy: Promise<string> | undefined;
export const decoyPasswordHash = () => (decoy ??= hashPassword(randomBytes(18).toString("base64url")));

const SESSION_PATTERN = /^wa_session_[A-Za-z0-9_-]{43}$/;

/** A session token (`wa_session_<43>`), its CSRF token, and the hashes that are stored. */
export function generateSession(): { token: string; hash: string; csrfToken: string; csrfHash: string } {
  const token = `wa_session_${randomBytes(32).toString("base64url")}`;
  const csrfToken = randomBytes(32).toString("base64url");
  return { token, hash: hashApiKey(token), csrfToken, csrfHash: hashApiKey(csrfToken) };
}
export const isWellFormedSessionToken = (token: string) => SESSION_PATTERN.test(token);
export const hashSecret = hashApiKey;

/** An address as stored and compared: trimmed, lower-cased. */
export const normalizeEmail = (email: string) => email.trim().toLowerCase();
/** Deliberately loose: one @, something on each side, no spaces. */
export const isEmail = (email: string) => /^[^\s@]{1,64}@[^\s@]{1,255}$/.test(email) && email.length <= 320;
