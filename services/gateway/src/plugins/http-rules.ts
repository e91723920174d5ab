/**
 * The generic HTTP rules, before anything else: every request's X-Request-ID
 * answer header, a Host header on HTTP/1.1, every method Node accepts routed
 * (so an unsupported one is 405, not 404), CONNECT and unparsable requests
 * answered with the envelope, and bodies read raw (decoded by the forward
 * route once the operation's rules allow it).
 */
import { METHODS } from "node:http";
import { AppError, badRequest, OPERATIONS } from "@whereabouts/shared";
import { answerConnect } from "../http/client-error.ts";
import { BODY_LIMIT_BYTES } from "../http/request-decoding.ts";
import { appPlugin } from "./app-plugin.ts";

/**
 * Every method Node's HTTP parser accepts (CONNECT is a tunnel, never a
 * request): registered on each route so that any unsupported one is a 405
 * with Allow, not a 404.
 */
export const ROUTE_METHODS = METHODS.filter((m) => m !== "CONNECT");

/** Routes whose multipart body streams to their handler (the bulk upload), never into memory. */
const STREAMED = new Set(OPERATIONS.filter((op) => op.body?.media === "multipart/form-data").map((op) => op.path));

export const httpRulesPlugin = appPlugin("http-rules", async (app) => {
  for (const method of ROUTE_METHODS) {
    if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
  }
  // CONNECT never reaches a route (Node hands it over as a tunnel): it gets the envelope too.
  app.server.on("connect", answerConnect);

  // Bodies are read raw and decoded by the forward route, after the checks of the pipeline.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  // Multipart elsewhere is read like any body, within the 1 MiB limit, and refused with 415 by the route.
  app.addContentTypeParser("multipart/form-data", (request, payload, done) => {
    if (STREAMED.has(request.routeOptions.url ?? "")) return done(null, undefined);
    let size = 0;
    const chunks: Buffer[] = [];
    payload.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= BODY_LIMIT_BYTES) chunks.push(chunk);
    });
    payload.on("end", () =>
      size > BODY_LIMIT_BYTES ? done(new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`)) : done(null, Buffer.concat(chunks)),
    );
    payload.on("error", (err) => done(err));
  });

  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    // A missing Host is answered here with the envelope, not by Node's bare 400 (requireHostHeader: false).
    if (request.raw.httpVersion === "1.1" && request.headers.host === undefined) return done(badRequest("An HTTP/1.1 request needs a Host header"));
    done();
  });
});
