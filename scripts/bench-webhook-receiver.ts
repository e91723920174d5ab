/**
 * The receiver of scripts/bench-webhook-drain.ts, in a process of its own (so
 * the drain's own CPU time is the dispatcher's): answers every POST with 204
 * and reports over IPC its port, then how many requests it has received
 * ("reset" starts the count again, answered with the count).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

let received = 0;
let reported = 0;
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    received++;
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
// A backlog for every connection the dispatcher may open at once (100 webhooks × 16): past the default 511 they wait for SYN retries.
server.listen({ port: 0, host: "127.0.0.1", backlog: 4096 }, () => process.send!({ port: (server.address() as AddressInfo).port }));
process.on("message", (m) => {
  if (m === "reset") {
    received = 0;
    reported = 0;
    process.send!({ received });
  }
});
setInterval(() => {
  if (received === reported) return;
  reported = received;
  process.send!({ received });
}, 10);
process.on("disconnect", () => process.exit(0));
