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

/** One id's read in a batch: every caller of that id gets this promise. */
type Pending = { view: Promise<string | undefined>; settle: (read: Promise<Map<number, string>>, id: number) => void };

function pendingRead(): Pending {
  let settle!: Pending["settle"];
  const view = new Promise<string | undefined>((resolve, reject) => {
    settle = (read, id) => read.then((views) => resolve(views.get(id)), reject);
  });
  return { view, settle };
}

export interface FindStatements {
  find(orgId: number, id: number): Promise<string | undefined>;
  findMany(orgId: number, ids: readonly number[]): Promise<Map<number, string>>;
}

/** `find` as it answers one request; `statements.find` and `statements.findMany` as the statements run. */
export function coalescedFinds(statements: FindStatements): (orgId: number, id: number) => Promise<string | undefined> {
  /** The turn's requests: by organization, by id. */
  let batch: Map<number, Map<number, Pending>> | undefined;

  function flush(): void {
    const turn = batch!;
    batch = undefined;
    for (const [orgId, byId] of turn) {
      const ids = [...byId.keys()];
      const read =
        ids.length === 1
          ? statements.find(orgId, ids[0]!).then((view) => new Map(view === undefined ? [] : [[ids[0]!, view]]))
          : statements.findMany(orgId, ids);
      for (const [id, pending] of byId) pending.settle(read, id);
    }
  }

  return (orgId, id) => {
    if (!batch) {
      batch = new Map();
      setImmediate(flush);
    }
    let byId = batch.get(orgId);
    if (!byId) batch.set(orgId, (byId = new Map()));
    let pending = byId.get(id);
    if (!pending) byId.set(id, (pending = pendingRead()));
    return pending.view;
  };
}
