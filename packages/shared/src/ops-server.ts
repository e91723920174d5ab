/**
 * The ops server every process runs on its own port (OPS_PORT, 9464; the
 * manifests' `ops` port): `/healthz` (200 while the process lives), `/readyz`
 * (200 when every readiness check passes, 503 otherwise: starting, a
 * dependency down, or shutting down) and `/metrics` (Prometheus text).
 * Kept off the API port so probes and scrapes never meet auth, rate limits or
 * the API's error envelope.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.ts";

/** Passes when it resolves to anything but `false`; fails when it throws or takes too long. */
export type ReadinessCheck = () => unknown;

export interface ReadinessReport {
  ready: boolean;
  /** Each check's result; `stopping` or `starting` appear while they apply. */
  checks: Record<string, boolean>;
}

/** Runs the checks in parallel, each bounded by `timeoutMs`. */
export async function runReadinessChecks(checks: Record<string, ReadinessCheck>, timeoutMs = 1500): Promise<ReadinessReport> {
  const names = Object.keys(checks);
  const results = await Promise.all(
    names.map(async (name) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const outcome = await Promise.race([
          (async () => checks[name]!())(),
          new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
        ]);
        return outcome !== false;
      } catch {
        return false;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  const out = Object.fromEntries(names.map((name, i) => [name, results[i]!]));
  return { ready: results.every(Boolean), checks: out };
}

export interface OpsServer {
  /** The port it listens on (the real one when started with port 0). */
  readonly port: number;
  readonly url: string;
  /** What `/readyz` reports; until set, the process is starting (503). */
  setReadiness(readiness: () => Promise<ReadinessReport>): void;
  close(): Promise<void>;
}

const PROBE_ALLOW = "GET, HEAD";

export async function startOpsServer(options: {
  port: number;
  /** Default: every interface (kubelet and Prometheus reach the pod IP). */
  host?: string;
  metrics: Metrics;
  logger: Logger;
  readiness?: () => Promise<ReadinessReport>;
}): Promise<OpsServer> {
  const { metrics, logger } = options;
  let readiness = options.readiness;
  let failing = true; // until the first ready report: starting is not news

  const send = (req: IncomingMessage, res: ServerResponse, status: number, type: string, body: string, extra: Record<string, string> = {}) => {
    res.writeHead(status, {
      "content-type": type,
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
      ...extra,
    });
    res.end(req.method === "HEAD" ? undefined : body);
  };
  const json = (req: IncomingMessage, res: ServerResponse, status: number, value: unknown, extra?: Record<string, string>) =>
    send(req, res, status, "application/json", JSON.stringify(value), extra);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/healthz" && path !== "/readyz" && path !== "/metrics") {
      return json(req, res, 404, { status: "not_found" });
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return json(req, res, 405, { status: "method_not_allowed" }, { allow: PROBE_ALLOW });
    }
    if (path === "/healthz") return json(req, res, 200, { status: "ok" });
    if (path === "/metrics") {
      return send(req, res, 200, metrics.registry.contentType, await metrics.registry.metrics());
    }
    const report: ReadinessReport = readiness ? await readiness() : { ready: false, checks: { starting: false } };
    // Log transitions only: probes come every few seconds.
    if (report.ready === failing) {
      failing = !report.ready;
      if (failing) logger.warn({ checks: report.checks }, "not ready");
      else logger.info({ checks: report.checks }, "ready");
    }
    return json(req, res, report.ready ? 200 : 503, { status: report.ready ? "ready" : "not_ready", checks: report.checks });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger.error({ err, url: req.url }, "ops request failed");
      if (!res.headersSent) json(req, res, 500, { status: "error" });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port }, "ops server listening");

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    setReadiness(next) {
      readiness = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
