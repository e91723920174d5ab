/**
 * The two streaming ends of bulk (EXTENSIONS.md section 3) at the gateway:
 * - upload: `multipart/form-data` parsed as it arrives (busboy); the `file`
 *   part streams into the JetStream object store, never into memory, and the
 *   catalog is asked to start the job (`asset.bulk`) with the object's name
 *   and the `mode` / `on_error` parts; the body is capped at 64 MiB (413);
 * - export: `GET /api/v1/assets` with `Accept: text/csv` streams the list,
 *   chunk after chunk from `asset.export`, as one CSV.
 */
import { Readable, Transform } from "node:stream";
import type { IncomingMessage } from "node:http";
import busboy from "busboy";
import type { ObjectStore } from "@nats-io/obj";
import {
  AppError,
  callRpc,
  callRpcRaw,
  fieldError,
  newRequestId,
  rpcSubject,
  openUploads,
  ValidationError,
  type NatsConnection,
  type RawRpcReply,
  type RpcRequest,
} from "@whereabouts/shared";

export const BULK_BODY_LIMIT_BYTES = 64 * 1024 * 1024;

const tooLarge = () => new AppError("payload_too_large", `Request body exceeds ${BULK_BODY_LIMIT_BYTES} bytes`);

export function isMultipart(contentType: string | undefined): boolean {
  return typeof contentType === "string" && /^multipart\/form-data\s*;/i.test(contentType.trim()) && /boundary=/i.test(contentType);
}

export function createBulkUploads(nc: NatsConnection, rpcTimeoutMs: number) {
  let store: Promise<ObjectStore> | undefined;
  const uploads = () => (store ??= openUploads(nc).catch((err: unknown) => {
    store = undefined;
    throw err;
  }));

  /** Streams the upload into the object store, then asks the catalog to queue the job. */
  async function upload(raw: IncomingMessage, envelope: RpcRequest): Promise<RawRpcReply> {
    if (!isMultipart(raw.headers["content-type"])) {
      throw new AppError("unsupported_media_type", "POST /api/v1/assets/bulk takes multipart/form-data (parts file, mode, on_error)");
    }
    const declared = Number(raw.headers["content-length"]);
    if (Number.isFinite(declared) && declared > BULK_BODY_LIMIT_BYTES) {
      raw.resume();
      throw tooLarge();
    }
    const objects = await uploads();
    const objectName = `org-${envelope.principal.org_id}-${newRequestId()}`;
    const fields: Record<string, string> = {};
    let stored = false;
    let received = 0;

    await new Promise<void>((resolve, reject) => {
      let failed = false;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        raw.unpipe();
        raw.resume();
        reject(err);
      };
      const parser = busboy({ headers: raw.headers, limits: { files: 1, fields: 10, fieldSize: 1024, parts: 12 } });
      const storing: Array<Promise<unknown>> = [];
      parser.on("field", (name, value) => {
        fields[name] = value;
      });
      parser.on("file", (name, file) => {
        if (name !== "file" || stored) {
          file.resume();
          return;
        }
        stored = true;
        storing.push(objects.put({ name: objectName }, Readable.toWeb(file) as ReadableStream<Uint8Array>).catch(fail));
      });
      parser.on("error", (err: unknown) => fail(new AppError("bad_request", `The multipart body is malformed: ${(err as Error).message}`)));
      parser.on("close", () => {
        Promise.all(storing).then(() => !failed && resolve(), fail);
      });
      // The cap counts the whole body, as it arrives.
      const counter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          received += chunk.length;
          if (received > BULK_BODY_LIMIT_BYTES) return done(tooLarge());
          done(null, chunk);
        },
      });
      counter.on("error", fail);
      raw.on("error", fail);
      raw.pipe(counter).pipe(parser);
    }).catch(async (err: unknown) => {
      if (stored) await objects.delete(objectName).catch(() => undefined);
      throw err;
    });

    if (!stored) throw new ValidationError([fieldError("file", "required", "the file part is required")]);
    const unknown = Object.keys(fields).filter((k) => k !== "mode" && k !== "on_error");
    if (unknown.length) {
      await objects.delete(objectName).catch(() => undefined);
      throw new ValidationError(unknown.map((k) => fieldError(k, "unknown_field", `${k} is not a known part; known: file, mode, on_error`)));
    }
    return callRpcRaw(nc, rpcSubject("catalog", "asset.bulk"), { ...envelope, body: { object: objectName, ...fields } }, { timeoutMs: rpcTimeoutMs });
  }

  /**
   * The list as CSV: the first chunk is asked before anything is sent (a bad
   * query is still a 400 envelope); then the rest, chunk by chunk.
   */
  async function exportCsv(envelope: RpcRequest): Promise<Readable> {
    // Keyset paging: each chunk names the previous chunk's last row (`after`, as catalog returned it).
    const chunk = async (after: string | null) => {
      const params: Record<string, string> = after === null ? {} : { after };
      const reply = await callRpc(nc, rpcSubject("catalog", "asset.export"), { ...envelope, params }, { timeoutMs: rpcTimeoutMs });
      if (reply.status >= 400) {
        const error = (reply.body as { error?: { type?: string; detail?: string; fields?: unknown } }).error;
        if (error?.type === "validation_error") throw Object.assign(new ValidationError((error.fields ?? []) as never), {});
        throw new AppError((error?.type ?? "internal_error") as never, error?.detail ?? "The export failed");
      }
      return (reply.body as { data: { csv: string; rows: number; done: boolean; after: string | null } }).data;
    };
    const first = await chunk(null);
    return Readable.from(
      (async function* () {
        yield first.csv;
        let { done, after } = first;
        while (!done && after !== null) {
          const next = await chunk(after);
          yield next.csv;
          ({ done, after } = next);
        }
      })(),
    );
  }

  return { upload, exportCsv };
}
