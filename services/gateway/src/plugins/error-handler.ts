/**
 * The one place errors become HTTP: every error (the pipeline's, a service's
 * reply is rendered by the forward route) is the spec's envelope, 5xx text
 * hidden and logged with the request id; unknown paths are 404.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError, badRequest, notFound, toErrorEnvelope } from "@whereabouts/shared";
import { BODY_LIMIT_BYTES, unsupportedMediaType } from "../http/request-decoding.ts";
import { pathOf } from "../http/request-target.ts";
import { appPlugin } from "./app-plugin.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Answers with the error envelope of `err` (and the headers an AppError carries). */
    sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply;
  }
}

export const errorHandlerPlugin = appPlugin("error-handler", async (app) => {
  function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
    const mapped = fromFrameworkError(err, request.method);
    const envelope = toErrorEnvelope(mapped, { instance: pathOf(request), request_id: request.id });
    if (envelope.error.status >= 500 && !(mapped instanceof AppError)) {
      request.log.error({ err, request_id: request.id }, "request failed");
    }
    if (mapped instanceof AppError) for (const [name, value] of Object.entries(mapped.headers)) reply.header(name, value);
    return reply.code(envelope.error.status).header("content-type", "application/json").send(Buffer.from(JSON.stringify(envelope)));
  }
  app.decorate("sendError", sendError);
  app.setErrorHandler((err, request, reply) => sendError(request, reply, err));
  app.setNotFoundHandler(async (request) => {
    throw notFound(`No resource at ${pathOf(request)}`);
  });
});

/**
 * Fastify's own errors (body limit, unparsable Content-Type, bad lengths) as
 * the spec's error types; anything else unknown stays an internal error.
 */
function fromFrameworkError(err: unknown, method: string): unknown {
  if (err instanceof AppError || !(err instanceof Error)) return err;
  const { code, statusCode } = err as { code?: string; statusCode?: number };
  if (code === "FST_ERR_CTP_BODY_TOO_LARGE" || statusCode === 413) {
    return new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
  }
  if (code === "FST_ERR_CTP_INVALID_MEDIA_TYPE" || statusCode === 415) return unsupportedMediaType(method);
  if (code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") return badRequest("Content-Length does not match the body");
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) return badRequest(err.message);
  return err;
}
