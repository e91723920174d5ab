/**
 * What the stack shows after the chaos, read the way a client or an operator
 * would: positions (each asset's location_id) and the asset-locations report
 * through the public API, page by page; history rows and their ties straight
 * from tracking's table (a count per asset through the API would be one call
 * per asset); dead letters from the SCANS_DLQ stream, by the reason header.
 */
import { z } from "zod";
import { scanDlqSubject, type NatsConnection } from "@whereabouts/shared";
import type pg from "pg";
import { duplicateHistoryRows, historyRowCount } from "../../services/tracking/src/testing/history-checks.ts";
import { deadLetters } from "../../services/tracking/src/testing/tracking-fixtures.ts";
import { ReportPage, type ApiClient } from "../bench/api-client.ts";
import type { ShownPosition } from "./scan-ledger.ts";

const AssetPage = z.object({
  data: z.array(z.object({ id: z.number().int(), location_id: z.number().int().nullable() })),
  total_count: z.number().int(),
});

const PAGE = 200;

async function allPages<T extends { total_count: number; data: unknown[] }>(fetchPage: (offset: number) => Promise<T>): Promise<T["data"]> {
  const rows: T["data"] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await fetchPage(offset);
    rows.push(...page.data);
    if (page.data.length < PAGE || rows.length >= page.total_count) return rows;
  }
}

/** Every live asset's location_id, as GET /api/v1/assets lists it. */
export async function shownPositions(api: ApiClient): Promise<Map<number, ShownPosition>> {
  const rows = await allPages((offset) => api.get(`/api/v1/assets?limit=${PAGE}&offset=${offset}`, AssetPage));
  return new Map(rows.map((a) => [a.id, { locationId: a.location_id }]));
}

/** Every row of the asset-locations report: location and asset_last_seen per asset. */
export async function shownReport(api: ApiClient): Promise<Map<number, ShownPosition>> {
  const rows = await allPages((offset) => api.get(`/api/v1/reports/asset-locations?limit=${PAGE}&offset=${offset}&sort=asset_external_key`, ReportPage));
  return new Map(rows.map((r) => [r.asset_id, { locationId: r.location_id, lastSeen: r.asset_last_seen }]));
}

export interface HistoryState {
  rows: number;
  /** (asset, instant) pairs recorded more than once. */
  duplicated: number;
}

export async function historyState(sql: pg.Client, orgId: number): Promise<HistoryState> {
  return { rows: await historyRowCount(sql, orgId), duplicated: await duplicateHistoryRows(sql, orgId) };
}

/** Dead letters of one organization, counted by reason (in the reasons' order). */
export async function deadLettersByReason(nc: NatsConnection, orgId: number): Promise<Record<string, number>> {
  const subject = scanDlqSubject(orgId);
  const counts: Record<string, number> = {};
  for (const letter of await deadLetters(nc)) {
    if (letter.subject !== subject) continue;
    const reason = letter.reason ?? "(none)";
    counts[reason] = (counts[reason] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}
