/**
 * The load generator, run as its own process (forked by load-generator.ts)
 * so its CPU never counts inside a measured process. Two modes:
 *   closed - autocannon with N connections, each sending its next request
 *            when the last one answered (throughput cases);
 *   open   - a paced client that starts requests on a fixed schedule
 *            whatever the answers (fixed-rate cases), latency measured from
 *            each request's scheduled start, so a stall is not hidden
 *            (no coordinated omission).
 * Every response time, status and error is counted; nothing is dropped.
 */
import http from "node:http";
import autocannon from "autocannon";
import { countNon2xx, ratePerSecond, summarizeLatencies, type LatencySummary } from "./latency-stats.ts";
import { createRequestSource, type PlannedRequest, type RequestPlan } from "./request-plans.ts";

interface JobBase {
  baseUrl: string;
  apiKey?: string;
  plan: RequestPlan;
  seconds: number;
}
export type LoadJobSpec =
  | (JobBase & { mode: "closed"; connections: number; warmupSeconds: number })
  | (JobBase & { mode: "open"; perSecond: number; windowSeconds?: number });
export type LoadJob = LoadJobSpec & { id: number };

export interface LoadWindow {
  fromSecond: number;
  requests: number;
  latency: LatencySummary;
  non2xx: number;
  status5xx: number;
  errors: number;
}

export interface LoadReport {
  id: number;
  mode: LoadJob["mode"];
  /** Responses received (any status). */
  responses: number;
  elapsedMs: number;
  /** Responses per second over the measured time. */
  rate: number;
  latency: LatencySummary;
  statusCodes: Record<string, number>;
  non2xx: number;
  /** Connection errors and timeouts: requests that got no response. */
  errors: number;
  timeouts: number;
  errorSamples: string[];
  /** Open mode: requests scheduled, and the worst lateness of a start against its schedule. */
  scheduled?: number;
  maxStartLagMs?: number;
  windows?: LoadWindow[];
}

export type RunnerMessage = { type: "report"; report: LoadReport } | { type: "failed"; id: number; message: string };

const REQUEST_TIMEOUT_MS = 10_000;

class Recorder {
  readonly latencies: number[] = [];
  readonly statusCodes: Record<string, number> = {};
  errors = 0;
  timeouts = 0;
  readonly errorSamples: string[] = [];
  response(status: number, ms: number) {
    this.latencies.push(ms);
    this.statusCodes[status] = (this.statusCodes[status] ?? 0) + 1;
  }
  error(message: string, timeout = false) {
    this.errors++;
    if (timeout) this.timeouts++;
    if (this.errorSamples.length < 5 && !this.errorSamples.includes(message)) this.errorSamples.push(message);
  }
}

function headersFor(job: JobBase, request: PlannedRequest): Record<string, string> {
  return {
    ...(job.apiKey ? { authorization: `Bearer ${job.apiKey}` } : {}),
    ...(request.contentType ? { "content-type": request.contentType } : {}),
  };
}

function autocannonRun(job: JobBase & { connections: number }, seconds: number, recorder: Recorder): Promise<number> {
  const next = createRequestSource(job.plan);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: job.baseUrl,
        connections: job.connections,
        duration: seconds,
        timeout: REQUEST_TIMEOUT_MS / 1000,
        requests: [
          {
            // A new headers object each time: autocannon adds Content-Length to it.
            setupRequest: (req) => {
              const r = next();
              return { ...req, method: r.method, path: r.path, body: r.body, headers: headersFor(job, r) };
            },
          },
        ],
      },
      (err) => (err ? reject(err) : resolve(performance.now() - started)),
    );
    instance.on("response", (_client, status, _bytes, ms) => recorder.response(status, ms));
    instance.on("reqError", (err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      recorder.error(message, /timed out/.test(message));
    });
  });
}

async function runClosed(job: Extract<LoadJob, { mode: "closed" }>): Promise<LoadReport> {
  if (job.warmupSeconds > 0) await autocannonRun(job, job.warmupSeconds, new Recorder());
  const recorder = new Recorder();
  const elapsedMs = await autocannonRun(job, job.seconds, recorder);
  return report(job, recorder, elapsedMs);
}

interface Sample {
  fromStartMs: number;
  status: number;
  ms: number;
}

async function runOpen(job: Extract<LoadJob, { mode: "open" }>): Promise<LoadReport> {
  const next = createRequestSource(job.plan);
  const url = new URL(job.baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const recorder = new Recorder();
  const samples: Sample[] = [];
  const failures: number[] = [];
  const total = Math.round(job.perSecond * job.seconds);
  const intervalMs = 1000 / job.perSecond;
  let inFlight = 0;
  let maxStartLagMs = 0;
  let scheduled = 0;
  let settle: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => (settle = resolve));
  const start = performance.now();

  const fire = (intended: number) => {
    const r = next();
    inFlight++;
    const finish = () => {
      if (--inFlight === 0 && scheduled === total) settle();
    };
    const req = http.request(
      { host: url.hostname, port: url.port, method: r.method, path: r.path, agent, headers: headersFor(job, r), timeout: REQUEST_TIMEOUT_MS },
      (res) => {
        res.resume();
        res.on("end", () => {
          const ms = performance.now() - intended;
          const status = res.statusCode ?? 0;
          recorder.response(status, ms);
          samples.push({ fromStartMs: intended - start, status, ms });
          finish();
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("request timed out")));
    req.on("error", (err) => {
      recorder.error(err.message, err.message === "request timed out");
      failures.push(intended - start);
      finish();
    });
    req.end(r.body);
  };

  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (scheduled < total && start + scheduled * intervalMs <= now) {
        const intended = start + scheduled * intervalMs;
        maxStartLagMs = Math.max(maxStartLagMs, now - intended);
        scheduled++;
        fire(intended);
      }
      if (scheduled < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  if (inFlight > 0) await allDone;
  const elapsedMs = performance.now() - start;
  agent.destroy();
  const result = report(job, recorder, elapsedMs);
  result.scheduled = scheduled;
  result.maxStartLagMs = maxStartLagMs;
  if (job.windowSeconds) result.windows = windows(samples, failures, job.windowSeconds, job.seconds);
  return result;
}

function windows(samples: Sample[], failures: number[], windowSeconds: number, seconds: number): LoadWindow[] {
  const out: LoadWindow[] = [];
  const windowMs = windowSeconds * 1000;
  for (let from = 0; from < seconds * 1000; from += windowMs) {
    const inside = samples.filter((s) => s.fromStartMs >= from && s.fromStartMs < from + windowMs);
    out.push({
      fromSecond: from / 1000,
      requests: inside.length,
      latency: summarizeLatencies(inside.map((s) => s.ms)),
      non2xx: inside.filter((s) => s.status < 200 || s.status > 299).length,
      status5xx: inside.filter((s) => s.status >= 500).length,
      errors: failures.filter((f) => f >= from && f < from + windowMs).length,
    });
  }
  return out;
}

function report(job: LoadJob, recorder: Recorder, elapsedMs: number): LoadReport {
  return {
    id: job.id,
    mode: job.mode,
    responses: recorder.latencies.length,
    elapsedMs,
    rate: ratePerSecond(recorder.latencies.length, elapsedMs),
    latency: summarizeLatencies(recorder.latencies),
    statusCodes: recorder.statusCodes,
    non2xx: countNon2xx(recorder.statusCodes),
    errors: recorder.errors,
    timeouts: recorder.timeouts,
    errorSamples: recorder.errorSamples,
  };
}

process.on("message", (job: LoadJob) => {
  const run = job.mode === "closed" ? runClosed(job) : runOpen(job);
  run.then(
    (result) => process.send?.({ type: "report", report: result } satisfies RunnerMessage),
    (err: unknown) => process.send?.({ type: "failed", id: job.id, message: err instanceof Error ? err.message : String(err) } satisfies RunnerMessage),
  );
});
process.on("disconnect", () => process.exit(0));
