/**
 * One active replica for work whose order matters. The replica that holds a
 * Postgres session advisory lock runs the workers; the others try again every
 * `retryMs` and take over when the holder's connection goes (its process
 * died, or the database dropped it). Reporting consumes its streams this way:
 * its partner feed numbers events as they commit, and two replicas committing
 * interleaved batches would reorder an asset's events.
 */
import type pg from "pg";
import type { Logger } from "pino";
import type { Worker } from "./service.ts";
import { checkout } from "./sql.ts";

/** Resolves after the first attempt: a replica that could lead is leading when this returns. */
export async function runAsLeader(options: {
  pool: pg.Pool;
  lock: string;
  logger: Logger;
  retryMs?: number;
  start: () => Promise<Worker[]>;
}): Promise<Worker & { leading(): boolean }> {
  const retryMs = options.retryMs ?? 2000;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let held: { client: pg.PoolClient; workers: Worker[] } | undefined;
  let turn: Promise<void> = Promise.resolve();

  const lose = async (why: string, err?: unknown) => {
    const current = held;
    if (!current) return;
    held = undefined;
    options.logger.warn({ err, lock: options.lock }, `leadership lost (${why}); stopping, then trying again`);
    await Promise.all(current.workers.map((w) => w.stop().catch(() => undefined)));
    current.client.release(true);
  };

  const attempt = async () => {
    if (stopped) return;
    try {
      if (held) {
        // Still ours: the session is alive (a dropped connection would have released the lock).
        await held.client.query("SELECT 1");
        return;
      }
      const client = await checkout(options.pool);
      let locked = false;
      try {
        const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS locked", [options.lock]);
        locked = rows[0]?.locked === true;
      } finally {
        if (!locked) client.release();
      }
      if (!locked || stopped) {
        if (locked) client.release(true);
        return;
      }
      client.once("end", () => void (turn = turn.then(() => lose("connection ended"))));
      const workers = await options.start().catch(async (err: unknown) => {
        client.release(true);
        throw err;
      });
      held = { client, workers };
      options.logger.info({ lock: options.lock }, "leading: this replica runs the ordered workers");
    } catch (err) {
      if (held) await lose("check failed", err);
      else options.logger.warn({ err, lock: options.lock }, "could not take leadership; trying again");
    }
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      turn = turn.then(attempt).finally(schedule);
    }, retryMs);
    timer.unref();
  };
  turn = turn.then(attempt).finally(schedule);
  await turn;

  return {
    leading: () => held !== undefined,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await turn.catch(() => undefined);
      const current = held;
      held = undefined;
      if (!current) return;
      await Promise.all(current.workers.map((w) => w.stop()));
      await current.client.query("SELECT pg_advisory_unlock(hashtext($1))", [options.lock]).catch(() => undefined);
      current.client.release();
    },
  };
}
