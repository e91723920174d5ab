/**
 * `npm run -s reset-streams [-- --yes]`: deletes this stack's streams (those
 * of the current STREAM_PREFIX) on the broker at NATS_URL, with every event
 * in them and the deployment they were bound to, so that the next start binds
 * new ones to its own database (see packages/shared/src/deployment.ts).
 *
 * Asks for confirmation on a terminal; without one, `--yes` is required.
 * Prints one JSON object on stdout (`{"deleted":[...]}`) and exits 0, or a
 * message on stderr and a non-zero exit, as the admin CLI does.
 */
import { createInterface } from "node:readline/promises";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { z } from "zod";
import {
  DATA_STREAMS,
  DEFAULT_NATS_URL,
  deleteStreams,
  parseConfig,
  readStreamsDeployment,
  STREAM_PREFIX,
  StreamPrefix,
  STREAMS,
} from "@whereabouts/shared";

const ResetEnv = z.object({
  NATS_URL: z.string().min(1).default(DEFAULT_NATS_URL),
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().min(1).optional(),
  STREAM_PREFIX: StreamPrefix,
});

class UsageError extends Error {
  override readonly name = "UsageError";
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim().toLowerCase() === "yes";
  } finally {
    rl.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const unknown = argv.filter((a) => a !== "--yes" && a !== "-y");
  if (unknown.length) throw new UsageError(`unknown argument ${unknown[0]}; usage: npm run -s reset-streams [-- --yes]`);
  // `npm run -s reset-streams --yes` (no `--`) hands --yes to npm, which passes it on as npm_config_yes.
  const yes = argv.length > 0 || process.env.npm_config_yes === "true";
  const config = parseConfig(ResetEnv);
  const nc = await connect({
    servers: config.NATS_URL.split(","),
    timeout: 3000,
    maxReconnectAttempts: 0,
    ...(config.NATS_USER ? { user: config.NATS_USER, pass: config.NATS_PASSWORD ?? "" } : {}),
  }).catch((err: unknown) => {
    throw new Error(`NATS does not answer at ${config.NATS_URL}: ${(err as Error).message}`);
  });
  try {
    const jsm = await jetstreamManager(nc);
    const present: string[] = [];
    let messages = 0;
    for (const name of [...DATA_STREAMS, STREAMS.DEPLOYMENT.name]) {
      const info = await jsm.streams.info(name).catch(() => undefined);
      if (!info) continue;
      present.push(name);
      if (name !== STREAMS.DEPLOYMENT.name) messages += info.state.messages;
    }
    if (present.length === 0) {
      console.log(JSON.stringify({ deleted: [], stream_prefix: STREAM_PREFIX || null }));
      return;
    }
    if (!yes) {
      const owner = await readStreamsDeployment(jsm).catch(() => undefined);
      const summary =
        `On ${config.NATS_URL}, STREAM_PREFIX ${STREAM_PREFIX ? `"${STREAM_PREFIX}"` : "unset"}: ${present.join(", ")}` +
        ` (${messages} messages${owner ? `, deployment ${owner.deployment_id} since ${owner.created_at}` : ""}).\n` +
        "Deleting them loses every event in them. Stop the stack that uses them first.\n";
      if (!process.stdin.isTTY) throw new UsageError(`${summary}No terminal to confirm on: pass --yes (npm run -s reset-streams -- --yes).`);
      process.stderr.write(summary);
      if (!(await confirm("Type yes to delete them: "))) throw new UsageError("Not confirmed; nothing deleted.");
    }
    const deleted = await deleteStreams(nc);
    console.log(JSON.stringify({ deleted, stream_prefix: STREAM_PREFIX || null }));
  } finally {
    await nc.close();
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`reset-streams: ${(err as Error).message}`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
