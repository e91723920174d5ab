/** A script run by bench-teardown.test.ts: two steps, the newest of which hangs in "hang" mode. */
import { runWithTeardown } from "../scripts/bench/teardown.ts";

const log = (message: string) => console.log(message);
runWithTeardown(async ({ teardown }) => {
  teardown.add("first", async () => log("stopped first"));
  if (process.argv[2] === "hang") {
    teardown.add("stuck step", () => {
      log("hanging");
      return new Promise<void>(() => {});
    });
  } else {
    teardown.add("second", async () => log("stopped second"));
  }
  // Keeps the event loop alive as the benchmark's sockets and children do.
  setInterval(() => {}, 60_000);
  log("ready");
  await new Promise<void>(() => {});
  return 0;
}, log);
