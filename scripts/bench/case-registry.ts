/**
 * Every case in the order a run takes them: the API cases on the freshly
 * seeded catalog first, the ingest cases next, then the report and history
 * reads over what the ingest wrote, and the measures of what remains
 * (history size, memory) last.
 */
import type { CaseName } from "./bench-options.ts";
import type { BenchCase } from "./bench-context.ts";
import { baselineCase } from "./cases/baseline-case.ts";
import { bulkImportCase } from "./cases/bulk-import-case.ts";
import { createAssetCase } from "./cases/create-asset-case.ts";
import { getAssetCase } from "./cases/get-asset-case.ts";
import { historyBytesCase } from "./cases/history-bytes-case.ts";
import { historyCase } from "./cases/history-case.ts";
import { ingestChurnCase } from "./cases/ingest-churn-case.ts";
import { ingestRetentionCase } from "./cases/ingest-retention-case.ts";
import { ingestSmoothingCase } from "./cases/ingest-smoothing-case.ts";
import { ingestSteadyCase } from "./cases/ingest-steady-case.ts";
import { listAssetsCase } from "./cases/list-assets-case.ts";
import { readUnderIngestCase } from "./cases/read-under-ingest-case.ts";
import { reportCase } from "./cases/report-case.ts";
import { rssCase } from "./cases/rss-case.ts";
import { searchAssetsCase } from "./cases/search-assets-case.ts";
import { soakCase } from "./cases/soak-case.ts";
import { visibilityCase } from "./cases/visibility-case.ts";
import { webhooksCase } from "./cases/webhooks-case.ts";

export const CASES: Record<CaseName, BenchCase> = {
  baseline: baselineCase,
  "get-asset": getAssetCase,
  "list-assets": listAssetsCase,
  "search-assets": searchAssetsCase,
  "create-asset": createAssetCase,
  "ingest-steady": ingestSteadyCase,
  "ingest-churn": ingestChurnCase,
  "ingest-smoothing": ingestSmoothingCase,
  "ingest-retention": ingestRetentionCase,
  visibility: visibilityCase,
  "read-under-ingest": readUnderIngestCase,
  webhooks: webhooksCase,
  report: reportCase,
  history: historyCase,
  "history-bytes": historyBytesCase,
  rss: rssCase,
  soak: soakCase,
  "bulk-import": bulkImportCase,
};

/** Cases whose rate is shown as a ratio to the baseline's. */
export const COMPARED_TO_BASELINE: readonly CaseName[] = ["get-asset", "list-assets", "search-assets", "create-asset"];

/** Cases that only read what the others left (no load): no need to let the stack go quiet first. */
export const PASSIVE_CASES: readonly CaseName[] = ["history-bytes", "rss"];
