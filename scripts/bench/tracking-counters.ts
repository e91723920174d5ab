/**
 * Tracking's ingestion counters over its internal `tracking.metrics` RPC: a
 * cross-check of the ingest cases (every published read recorded, nothing
 * unresolved or dead-lettered), never the measure of completion itself,
 * which is what the public API shows.
 */
import { z } from "zod";
import { decodeRpcReply, encodeJson, rpcSubject, type NatsConnection, type RpcRequest } from "@whereabouts/shared";

const Counters = z.object({
  scans: z.object({
    scansProcessed: z.number(),
    scansDuplicate: z.number(),
    readsRecorded: z.number(),
    tagsUnresolved: z.number(),
    deadLettered: z.record(z.string(), z.number()),
  }),
});

export interface IngestCounters {
  scansProcessed: number;
  scansDuplicate: number;
  readsRecorded: number;
  tagsUnresolved: number;
  deadLettered: number;
}

export async function readIngestCounters(nc: NatsConnection, orgId: number): Promise<IngestCounters> {
  const envelope: RpcRequest = {
    request_id: "bench-counters",
    principal: { key_id: 0, org_id: orgId, scopes: [] },
    method: "GET",
    route: "tracking.metrics",
    path: "tracking.metrics",
    params: {},
    query: {},
  };
  const msg = await nc.request(rpcSubject("tracking", "metrics"), encodeJson(envelope), { timeout: 5000 });
  const { scans } = Counters.parse(decodeRpcReply(msg).body);
  return {
    scansProcessed: scans.scansProcessed,
    scansDuplicate: scans.scansDuplicate,
    readsRecorded: scans.readsRecorded,
    tagsUnresolved: scans.tagsUnresolved,
    deadLettered: Object.values(scans.deadLettered).reduce((a, b) => a + b, 0),
  };
}

export function countersDelta(before: IngestCounters, after: IngestCounters): IngestCounters {
  return {
    scansProcessed: after.scansProcessed - before.scansProcessed,
    scansDuplicate: after.scansDuplicate - before.scansDuplicate,
    readsRecorded: after.readsRecorded - before.readsRecorded,
    tagsUnresolved: after.tagsUnresolved - before.tagsUnresolved,
    deadLettered: after.deadLettered - before.deadLettered,
  };
}
