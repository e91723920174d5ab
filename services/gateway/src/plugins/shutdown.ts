/**
 * Closing: once `close()` is called, requests still arriving get 503 with
 * Retry-After (another instance can serve them), and every answer ends its
 * keep-alive connection, so `close()` completes.
 */
import { serviceUnavailable } from "@whereabouts/shared";
import { appPlugin } from "./app-plugin.ts";

export const shutdownPlugin = appPlugin("shutdown", async (app) => {
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onRequest", (_request, reply, done) => {
    if (!closing) return done();
    reply.header("connection", "close");
    done(serviceUnavailable("The gateway is shutting down; retry on another instance", 1));
  });
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (closing) reply.header("connection", "close");
    done(null, payload);
  });
});
