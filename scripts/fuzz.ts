/**
 * The long fuzz run (issue 10): FUZZ_RUNS requests (default 100000) from
 * tests/http-fuzz.ts against a private stack (own database, own nats-server,
 * every service), FUZZ_CONCURRENCY connections at once (default 8). Prints
 * the totals and the first violations; exits 1 when there is any.
 *
 *   npm run fuzz
 *   FUZZ_RUNS=1000 FUZZ_SEED=42 npm run fuzz
 */
import fc from "fast-check";
import { emptyTotals, formatTotals, FuzzClient, fuzzCase, record, type FuzzCase } from "../tests/http-fuzz.ts";
import { startFuzzStack } from "../tests/http-fuzz-stack.ts";

const runs = Number(process.env.FUZZ_RUNS ?? 100_000);
const concurrency = Number(process.env.FUZZ_CONCURRENCY ?? 8);
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const BATCH = 500;

const fuzz = await startFuzzStack("fuzz_run");
const totals = emptyTotals();
const started = Date.now();
let generated = 0;
let batch = 0;
let queue: FuzzCase[] = [];
const arbitrary = fuzzCase(fuzz.keys);

// Ctrl-C stops sending; the requests in flight finish, the totals print and the stack is removed.
let stopped = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => (stopped = true));

/** The next case, generated in seeded batches (reproducible with FUZZ_SEED). */
function next(): FuzzCase | undefined {
  if (stopped || generated >= runs) return undefined;
  if (queue.length === 0) queue = fc.sample(arbitrary, { numRuns: Math.min(BATCH, runs - generated), seed: seed + batch++ });
  generated++;
  return queue.shift();
}

let lastReport = Date.now();
async function worker(): Promise<void> {
  const client = new FuzzClient(fuzz.port);
  try {
    for (let c = next(); c; c = next()) {
      record(totals, c, await client.send(c), 50);
      if (Date.now() - lastReport > 10_000) {
        lastReport = Date.now();
        console.error(`... ${totals.requests}/${runs}, 5xx ${totals.fiveXx}, envelope violations ${totals.envelopeViolations}`);
      }
    }
  } finally {
    client.close();
  }
}

console.error(`fuzzing ${runs} requests, seed ${seed}, ${concurrency} connections`);
try {
  await Promise.all(Array.from({ length: concurrency }, () => worker()));
} finally {
  totals.durationMs = Date.now() - started;
  await fuzz.stack.close();
}
console.log(`seed: ${seed}`);
console.log(formatTotals(totals));
const others = Object.values(totals.otherViolations).reduce((a, b) => a + b, 0);
process.exit(totals.fiveXx + totals.envelopeViolations + others > 0 ? 1 : 0);
