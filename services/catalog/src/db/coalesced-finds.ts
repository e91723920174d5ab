/**
 * GETs by id that arrive together, read in one statement. The NATS client
 * hands over every request of one socket read in the same turn of the event
 * loop, so under load a catalog replica holds several GETs at once; each as
 * its own statement costs a socket write to Postgres and back (the largest
 * item of catalog's CPU per read) and Postgres's per-statement overhead.
 * Requests are gathered until the turn's I/O callbacks are done (setImmediate:
 * no timer, nothing waits when a request comes alone) and read per
 * organization: one id by the single-row statement, several by one statement
 * of per-id primary-key lookups. Every request gets exactly what its own
 * statement would have returned, or that statement's error.
 */

type Waiter = { resolve: (view: string | undefined) => void; reject: (err: unknown) => void };

export interface FindStatements {
  find(orgId: number, id: number): Promise<string | undefined>;
  findMany(orgId: number, ids: readonly number[]): Promise<Map<number, string>>;
}

/** `find` as it answers one request; `statements.find` and `statements.findMany` as the statements run. */
export function coalescedFinds(statements: FindStatements): (orgId: number, id: number) => Promise<string | undefined> {
  let pending: Map<number, Map<number, Waiter[]>> | undefined;

  function flush(): void {
    const batch = pending!;
    pending = undefined;
    for (const [orgId, byId] of batch) {
      const ids = [...byId.keys()];
      const read: Promise<Map<number, string>> =
        ids.length === 1
          ? statements.find(orgId, ids[0]!).then((view) => new Map(view === undefined ? [] : [[ids[0]!, view]]))
          : statements.findMany(orgId, ids);
      read.then(
        (views) => {
          for (const [id, waiters] of byId) for (const w of waiters) w.resolve(views.get(id));
        },
        (err: unknown) => {
          for (const waiters of byId.values()) for (const w of waiters) w.reject(err);
        },
      );
    }
  }

  return (orgId, id) =>
    new Promise<string | undefined>((resolve, reject) => {
      if (!pending) {
        pending = new Map();
        setImmediate(flush);
      }
      let byId = pending.get(orgId);
      if (!byId) pending.set(orgId, (byId = new Map()));
      const waiters = byId.get(id);
      if (waiters) waiters.push({ resolve, reject });
      else byId.set(id, [{ resolve, reject }]);
    });
}
