/**
 * Scan points (EXTENSIONS.md section 5): a fixed reader's source (the last
 * token of `scans.<org_id>.<source>`) and optional antenna mapped to a
 * location. A scan without `location` resolves its location through them.
 * Owned by catalog (master data), published on CATALOG as `scan_point.*`;
 * tracking keeps a replica. Also the location roll-up summary's shape.
 */
import { z } from "zod";
import { Id, MAX_ID, Timestamp } from "./common.ts";
import { echoedTimestamp, validityFields } from "./catalog-requests.ts";
import { externalKey } from "../rules/external-key.ts";

/** `<source>` of `scans.<org_id>.<source>` (the same rule the scan subject follows). */
export const SCAN_POINT_SOURCE_PATTERN = /^[A-Za-z0-9_-]+$/;
export const SCAN_POINT_SOURCE_MAX = 255;

export const scanPointSource = () =>
  z
    .string()
    .min(1, { error: "source must not be empty" })
    .max(SCAN_POINT_SOURCE_MAX, { error: `source must be at most ${SCAN_POINT_SOURCE_MAX} characters` })
    .regex(SCAN_POINT_SOURCE_PATTERN, { error: "source may contain only ASCII letters, digits, '-' and '_' (a scan subject's last token)" })
    .meta({ description: "The reader: the last token of the scan subject scans.<org_id>.<source>" });

/** An antenna number; null maps every antenna of the source that has no mapping of its own. */
export const antennaField = () =>
  z
    .number()
    .int()
    .min(0)
    .max(MAX_ID)
    .meta({ description: "Antenna number (>= 0). null: the source's default, for any antenna without its own mapping" });

export const ScanPointView = z
  .object({
    id: Id,
    source: z.string(),
    antenna: z.number().int().nullable(),
    location_id: Id,
    location_external_key: z.string(),
    valid_from: Timestamp,
    valid_to: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: Timestamp.nullable(),
  })
  .meta({ id: "ScanPointView" });
export type ScanPointView = z.infer<typeof ScanPointView>;

const locationRef = {
  location_id: Id.optional().meta({ description: "Exclusive with location_external_key" }),
  location_external_key: externalKey("location_external_key").optional().meta({ description: "Exclusive with location_id" }),
};

export const ScanPointCreateRequest = z
  .object({
    source: scanPointSource(),
    antenna: antennaField().nullable().optional(),
    ...locationRef,
    ...validityFields,
  })
  .strict()
  .meta({ id: "ScanPointCreateRequest" });
export type ScanPointCreateRequest = z.infer<typeof ScanPointCreateRequest>;

export const ScanPointPatchRequest = z
  .object({
    source: scanPointSource().optional(),
    antenna: antennaField().nullable().optional(),
    ...locationRef,
    ...validityFields,
    id: z.number().optional().meta({ description: "Read-only: accepted when it equals the current id" }),
    created_at: echoedTimestamp("created_at").optional(),
    updated_at: echoedTimestamp("updated_at").optional(),
    deleted_at: echoedTimestamp("deleted_at").nullable().optional(),
  })
  .strict()
  .meta({ id: "ScanPointPatchRequest" });
export type ScanPointPatchRequest = z.infer<typeof ScanPointPatchRequest>;

export const SCAN_POINT_OPERATIONS = {
  list: "scan_point.list",
  create: "scan_point.create",
  get: "scan_point.get",
  update: "scan_point.update",
  delete: "scan_point.delete",
} as const;

/** GET /api/v1/locations/<id>/summary: roll-up counts over the location's subtree. */
export const LocationSummaryView = z
  .object({
    location_id: Id,
    /** Live, currently effective assets placed at this location itself. */
    assets_here: z.number().int(),
    /** The same over the whole subtree, this location included. */
    assets_in_subtree: z.number().int(),
    /** The newest asset_last_seen among those assets; null when there are none. */
    last_seen_in_subtree: Timestamp.nullable(),
  })
  .meta({ id: "LocationSummary" });
export type LocationSummaryView = z.infer<typeof LocationSummaryView>;

export const LOCATION_SUMMARY_OPERATION = "location.summary";
