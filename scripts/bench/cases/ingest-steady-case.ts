/**
 * `ingest-steady`: events of 10 tags where 9 reads repeat an asset at the
 * location it is already at and one moves an asset there, offered at the
 * target rate; reads/s from first publish until the last event's effects
 * (history, position, report) are visible through the API.
 */
import { ingestCase } from "../ingest-run.ts";

export const ingestSteadyCase = ingestCase("ingest-steady", 50_000, (fleet) => fleet.steadyReads());
