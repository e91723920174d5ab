/**
 * Webhook signatures (EXTENSIONS.md section 4):
 * `Whereabouts-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
 * with a second `v1=` while a rotated-out secret is still valid.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "Whereabouts-Signature";

/** A new signing secret: `whsec_` and 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

export function signatureOf(secret: string, timestamp: number, body: string | Buffer): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/** The header value: one `v1` per secret, the current one first. */
export function signatureHeader(secrets: string[], timestamp: number, body: string | Buffer): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${signatureOf(s, timestamp, body)}`)].join(",");
}

/** What a receiver does (used by tests as a partner would write it): any v1 matching, and a fresh t. */
export function verifySignature(header: string, secret: string, body: string | Buffer, nowS = Math.floor(Date.now() / 1000), toleranceS = 300): boolean {
  const parts = header.split(",").map((p) => p.trim().split("=") as [string, string]);
  const t = Number(parts.find(([k]) => k === "t")?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowS - t) > toleranceS) return false;
  const expected = Buffer.from(signatureOf(secret, t, body), "hex");
  return parts.some(([k, v]) => k === "v1" && v !== undefined && v.length === expected.length * 2 && timingSafeEqual(Buffer.from(v, "hex"), expected));
}
