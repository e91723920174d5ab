/**
 * Poison isolation for batch consumers. A batch whose database work fails on
 * a healthy database is retried one message at a time; a message that still
 * fails on its own is handed to `reject` (dead letter / term), so one bad
 * message never blocks the stream and is never retried forever. Failures of
 * the database itself (unreachable, deadlock, serialization) are thrown: the
 * batch is nak'ed and retried later without counting anyone as poison.
 */
import { sqlStateOf, type JsMsg, type Logger } from "@whereabouts/shared";
import { databaseHealthy, type Db } from "./tracking-db.ts";

/** Thrown by a batch for a failure of its database work (the only kind isolation applies to). */
export class DataPhaseError extends Error {
  override readonly name = "DataPhaseError";
}

const TRANSIENT_SQLSTATES = new Set(["40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300"]);

export async function runIsolated(options: {
  messages: JsMsg[];
  process: (messages: JsMsg[]) => Promise<void>;
  reject: (msg: JsMsg, err: unknown) => Promise<void>;
  db: Db;
  logger: Logger;
}): Promise<void> {
  const { messages, db, logger } = options;
  const isPoisonCandidate = async (err: unknown) =>
    err instanceof DataPhaseError && !TRANSIENT_SQLSTATES.has(sqlStateOf(err) ?? "") && (await databaseHealthy(db));
  try {
    await options.process(messages);
    return;
  } catch (err) {
    if (!(await isPoisonCandidate(err))) throw err;
    logger.warn({ err, size: messages.length }, "batch failed on a healthy database; retrying message by message");
  }
  for (const msg of messages) {
    let lastError: unknown;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await options.process([msg]);
        lastError = undefined;
        break;
      } catch (err) {
        if (!(await isPoisonCandidate(err))) throw err;
        lastError = err;
      }
    }
    if (lastError !== undefined) await options.reject(msg, lastError);
  }
}
