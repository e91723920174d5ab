/**
 * `webhooks`: partner events pushed to a local receiver (EXTENSIONS.md
 * section 4). Scans move assets (churn: every read a move), each move is an
 * `asset.moved` event, and every webhook subscribed to it gets a signed POST.
 *
 * - webhooks-throughput: 100 webhooks, moves offered so that 10,000
 *   deliveries/s are due (2x the target: offered at exactly the target, the
 *   rate could only come out below it, by the last deliveries' latency); the
 *   rate is deliveries per second, from the first publish to the last
 *   delivery, so it measures what the stack delivers, not what was offered.
 * - webhooks-latency: 10 webhooks, 1,000 deliveries/s offered; each sample is
 *   publish of the scan → POST received (the whole path: ingestion, the
 *   projection's feed row, the dispatcher).
 *
 * A delivery counts once: a POST to a webhook's own path, signed with its
 * secret (the documented recipe), answered 204; a repeat of one (at least
 * once: a retry after a timeout) is answered too but counted apart, and a
 * POST that fails the check gets 400 and counts as an error.
 *
 * The webhooks are deleted afterwards, so later cases do not pay for them.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { atLeast, below, skippedRow, type CaseRow, type Target } from "../bench-case.ts";
import type { BenchCase, BenchContext } from "../bench-context.ts";
import { summarizeLatencies } from "../latency-stats.ts";
import { paced } from "../scan-publisher.ts";
import { TAGS_PER_EVENT } from "../scan-workload.ts";

const throughputTarget: Target = { text: "≥5,000 deliveries/s (100 webhooks)", criteria: [atLeast("rate", 5000)] };
const latencyTarget: Target = { text: "p99 < 500 ms (scan → delivery, 1,000/s)", criteria: [below("p99", 500)] };
/** Deliveries/s the throughput run offers: above the target, so the figure is the stack's, not the offer's. */
const THROUGHPUT_OFFERED = 10_000;
const WebhookReply = z.object({ data: z.object({ id: z.number().int(), secret: z.string() }) });

interface Receiver {
  url: string;
  /** secret by the webhook's path ("/hook/<i>") */
  secrets: Map<string, string>;
  /** "<path> <event id>" of every delivery counted */
  delivered: Set<string>;
  repeats: number;
  rejected: number;
  /** publish time (ms) by "<asset_id>@<observed epoch ms>" */
  published: Map<string, number>;
  /** the "<asset_id>@<observed epoch ms>" of every move delivered at least once */
  movesSeen: Set<string>;
  latencies: number[];
  received: number;
  nonMoves: number;
  firstAt: number;
  lastAt: number;
  close(): Promise<void>;
}

/** The partner's check (EXTENSIONS.md section 4): any v1 = hex HMAC-SHA256(secret, "<t>.<raw body>"). */
function signedWith(header: string | string[] | undefined, secret: string, raw: Buffer): boolean {
  if (typeof header !== "string") return false;
  const parts = header.split(",").map((p) => p.split("="));
  const t = parts.find(([k]) => k === "t")?.[1];
  if (!t) return false;
  const expected = createHmac("sha256", secret).update(`${t}.`).update(raw).digest();
  return parts.some(([k, v]) => k === "v1" && v?.length === 64 && timingSafeEqual(Buffer.from(v, "hex"), expected));
}

async function startReceiver(): Promise<Receiver> {
  const r: Receiver = {
    url: "",
    secrets: new Map(),
    delivered: new Set(),
    repeats: 0,
    rejected: 0,
    published: new Map(),
    movesSeen: new Set(),
    latencies: [],
    received: 0,
    nonMoves: 0,
    firstAt: 0,
    lastAt: 0,
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const now = performance.now();
      const raw = Buffer.concat(chunks);
      const secret = r.secrets.get(req.url ?? "");
      const eventId = req.headers["whereabouts-event-id"];
      if (req.method !== "POST" || !secret || typeof eventId !== "string" || !signedWith(req.headers["whereabouts-signature"], secret, raw)) {
        r.rejected++;
        return void res.writeHead(400).end();
      }
      res.writeHead(204).end();
      const key = `${req.url} ${eventId}`;
      if (r.delivered.has(key)) return void r.repeats++;
      r.delivered.add(key);
      r.received++;
      r.firstAt ||= now;
      r.lastAt = now;
      const event = JSON.parse(raw.toString("utf8")) as { id: string; type: string; data: { asset_id: number; observed_at: string } };
      if (event.type !== "asset.moved") return void r.nonMoves++;
      const move = `${event.data.asset_id}@${Date.parse(event.data.observed_at)}`;
      r.movesSeen.add(move);
      const sent = r.published.get(move);
      if (sent !== undefined) r.latencies.push(now - sent);
    });
  });
  server.keepAliveTimeout = 60_000;
  // A backlog for every connection the dispatcher may open at once (16 per webhook): past the default 511 they wait for SYN retries.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: "127.0.0.1", backlog: 4096 }, resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  r.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return r;
}

async function deleteWebhook(ctx: BenchContext, id: number): Promise<void> {
  await fetch(`${ctx.api.baseUrl}/api/v1/webhooks/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${ctx.api.apiKey}` } });
}

/** One run: `webhooks` subscriptions, moves offered for `deliveriesPerSecond` over `seconds`. */
async function run(ctx: BenchContext, name: string, target: Target, webhooks: number, deliveriesPerSecond: number, seconds: number): Promise<CaseRow> {
  const ingest = ctx.ingest!;
  const receiver = await startReceiver();
  const ids: number[] = [];
  try {
    for (let i = 0; i < webhooks; i++) {
      const created = await ctx.api.post("/api/v1/webhooks", { url: `${receiver.url}/${i}`, types: ["asset.moved"] }, WebhookReply);
      ids.push(created.data.id);
      receiver.secrets.set(`${new URL(receiver.url).pathname}/${i}`, created.data.secret);
    }
    const scansPerSecond = deliveriesPerSecond / webhooks / TAGS_PER_EVENT;
    let publishErrors = 0;
    // Each asset moves once in a run: two moves of one asset that tracking takes in one batch are one position,
    // one `asset.moved` (coalesced per asset per batch, issue 9), and the case would count the first as missing.
    const moved = new Set<number>();
    const started = performance.now();
    await paced(scansPerSecond, seconds, async () => {
      const reads = ctx.fleet.churnReads(moved);
      for (const a of reads.assets) moved.add(a);
      const scan = ctx.scans.build(
        ctx.fleet.locations[reads.location]!,
        reads.assets.map((a) => ctx.fleet.assets[a]!),
      );
      const at = performance.now();
      for (const asset of scan.assets) receiver.published.set(`${asset.id}@${Date.parse(scan.observedAt)}`, at);
      await ingest.js.publish(scan.subject, scan.data).catch(() => void publishErrors++);
    });
    // Each asset moved once: a move per asset.
    const expected = moved.size * webhooks;
    // Everything offered arrives, or the case stops waiting a while after the last delivery.
    const deadline = performance.now() + ctx.profile.completionTimeoutMs;
    while (receiver.received < expected && performance.now() < deadline) {
      const before = receiver.received;
      await new Promise((r) => setTimeout(r, 500));
      if (receiver.received === before && performance.now() - receiver.lastAt > 15_000) break;
    }
    const missing = Math.max(0, expected - receiver.received);
    // Which moves no webhook heard of (asset id and observed_at), to look up in the stack's history.
    const missingMoves = [...receiver.published.keys()]
      .filter((move) => !receiver.movesSeen.has(move))
      .slice(0, 20)
      .map((move) => {
        const [assetId, at] = move.split("@");
        return `asset ${assetId} at ${new Date(Number(at)).toISOString()}`;
      });
    const elapsedS = (receiver.lastAt - started) / 1000;
    return {
      name,
      status: "ok",
      rate: { value: receiver.received / Math.max(0.001, elapsedS), unit: "deliveries/s" },
      latency: summarizeLatencies(receiver.latencies),
      metrics: {},
      non2xx: 0,
      errors: missing + publishErrors + receiver.rejected,
      target,
      note: `${webhooks} webhooks, ${Math.round(deliveriesPerSecond)} deliveries/s offered for ${seconds} s; latency is scan publish → POST received`,
      details: {
        webhooks,
        moves_published: moved.size,
        missing_moves: missingMoves,
        deliveries_expected: expected,
        deliveries_received: receiver.received,
        repeated_deliveries: receiver.repeats,
        rejected_requests: receiver.rejected,
        missing,
        publish_errors: publishErrors,
        other_events: receiver.nonMoves,
        offered_per_second: deliveriesPerSecond,
        delivered_over_s: Number(elapsedS.toFixed(2)),
      },
    };
  } finally {
    for (const id of ids) await deleteWebhook(ctx, id).catch(() => undefined);
    await receiver.close();
  }
}

export const webhooksCase: BenchCase = {
  name: "webhooks",
  target: throughputTarget,
  async run(ctx) {
    if (!ctx.ingest) return [skippedRow("webhooks", throughputTarget, "no NATS (set NATS_URL)")];
    const probe = await fetch(`${ctx.api.baseUrl}/api/v1/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${ctx.api.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ url: "http://127.0.0.1:9/probe", types: ["asset.moved"] }),
    });
    if (probe.status !== 201) {
      const why = `the stack refuses loopback webhooks (${probe.status}); run it with WEBHOOK_ALLOW_PRIVATE=true`;
      return [skippedRow("webhooks-throughput", throughputTarget, why), skippedRow("webhooks-latency", latencyTarget, why)];
    }
    await deleteWebhook(ctx, ((await probe.json()) as { data: { id: number } }).data.id);
    const seconds = ctx.profile.name === "quick" ? 5 : 15;
    return [
      await run(ctx, "webhooks-throughput", throughputTarget, 100, THROUGHPUT_OFFERED, seconds),
      await run(ctx, "webhooks-latency", latencyTarget, 10, 1000, seconds),
    ];
  },
};
