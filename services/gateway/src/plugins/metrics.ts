/** HTTP metrics: every answer counted and timed per route pattern (never the raw path: ids would explode the series). */
import type { Metrics } from "@whereabouts/shared";
import { appPlugin } from "./app-plugin.ts";

export const metricsPlugin = appPlugin<{ metrics: Pick<Metrics, "httpRequests" | "httpDuration"> }>("metrics", async (app, { metrics }) => {
  app.addHook("onResponse", (request, reply, done) => {
    const labels = { method: request.method, route: request.routeOptions.url ?? "unmatched", status: String(reply.statusCode) };
    metrics.httpRequests.inc(labels);
    metrics.httpDuration.observe(labels, reply.elapsedTime / 1000);
    done();
  });
});
