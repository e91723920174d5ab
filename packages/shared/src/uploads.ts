/**
 * The object store bucket of bulk uploads (EXTENSIONS.md section 3): the
 * gateway streams a file in, the catalog's job reads it back. One bucket per
 * stack (STREAM_PREFIX), deleted with the stack's streams by reset-streams.
 */
import { Objm, setSha256Backend, type ObjectStore } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { STREAMS } from "./subjects.ts";

/** An upload nobody started a job for is dropped after a week. */
const UPLOAD_TTL_NS = 7 * 24 * 3600 * 1_000_000_000;

export type { ObjectStore };

// Object digests hashed by node:crypto (process-wide): the library's default pure-JS
// SHA-256 cost the gateway and the catalog 0.25 s of CPU per read of a 6 MB upload.
setSha256Backend("native");

/** Opens the bucket, creating it on first use (idempotent). */
export function openUploads(nc: NatsConnection): Promise<ObjectStore> {
  return new Objm(nc).create(STREAMS.UPLOADS.bucket, { ttl: UPLOAD_TTL_NS });
}
