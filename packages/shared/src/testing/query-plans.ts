/**
 * EXPLAIN for plan tests: a statement's plan as a flat list of nodes, with
 * planner settings set for it alone (in a transaction rolled back after), so
 * a test can say which scans a statement makes on a state it built.
 */
import type pg from "pg";

export interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Index Cond"?: string;
  "Relation Name"?: string;
  Alias?: string;
  Plans?: PlanNode[];
}

const flatten = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(flatten)];

/** Every node of `text`'s plan (depth first), `settings` (name to value) local to it. */
export async function explainPlan(pool: pg.Pool, text: string, values: unknown[] = [], settings: Record<string, string> = {}): Promise<PlanNode[]> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    for (const [name, value] of Object.entries(settings)) await client.query(`SELECT set_config($1, $2, true)`, [name, value]);
    const result = await client.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
    return flatten(result.rows[0]!["QUERY PLAN"][0]!.Plan);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}
