/**
 * `ingest-churn`: as ingest-steady, but every read moves its asset to a
 * different location (every read changes a position and a report row).
 */
import { ingestCase } from "../ingest-run.ts";

export const ingestChurnCase = ingestCase("ingest-churn", 25_000, (fleet) => fleet.churnReads());
