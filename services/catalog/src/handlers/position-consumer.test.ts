/**
 * The position consumer's batch handler: between position messages (each
 * 2-3 ms of decoding) it lets waiting I/O go first, so an API read that
 * arrives while a large batch decodes is not held for the whole batch.
 */
import { describe, expect, it } from "vitest";
import type { BatchSettlement, JsMsg } from "@whereabouts/shared";
import type { CatalogClient } from "../db/catalog-db.ts";
import { positionBatchHandler } from "./position-consumer.ts";

/** A positions message whose decoding is logged in `order` (the handler reads `data` once per message). */
function positionsMessage(n: number, order: string[]): JsMsg & { acked: boolean } {
  const data = new TextEncoder().encode(
    JSON.stringify({
      version: 1,
      org_id: 1,
      positions: [{ event_id: `moved:1:${n}:1`, asset_id: n, location_id: 7, observed_at: "2026-11-27T10:00:00.000000Z", seq: 1, verb: "moved" }],
    }),
  );
  const msg = {
    subject: "tracking.events.1.asset.positions",
    acked: false,
    get data() {
      order.push(`decode ${n}`);
      return data;
    },
    ack() {
      msg.acked = true;
    },
  };
  return msg as unknown as JsMsg & { acked: boolean };
}

describe("positionBatchHandler", () => {
  it("lets pending I/O run between messages, then applies every move in one statement and acks", async () => {
    const order: string[] = [];
    const statements: unknown[][] = [];
    const db = {
      query: async (config: { values?: unknown[] }) => {
        order.push("statement");
        statements.push(config.values ?? []);
        return { rows: [], rowCount: 0 };
      },
    } as unknown as CatalogClient;
    const settle: BatchSettlement = { deadLetter: async () => expect.fail("nothing is malformed") };
    const messages = [1, 2, 3].map((n) => positionsMessage(n, order));

    // I/O that arrived while the batch started: it must not wait for the whole batch.
    setImmediate(() => order.push("io"));
    await positionBatchHandler(db)(messages, settle);

    expect(order).toEqual(["decode 1", "io", "decode 2", "decode 3", "statement"]);
    expect(statements).toHaveLength(1);
    // The three moves in one statement (asset ids as an array literal).
    expect(statements[0]![1]).toBe("{1,2,3}");
    expect(messages.every((m) => m.acked)).toBe(true);
  });
});
