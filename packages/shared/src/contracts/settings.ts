/**
 * Organization settings (EXTENSIONS.md section 5): `GET`/`PATCH
 * /api/v1/orgs/me/settings`. Owned by catalog (master data of the
 * organization), which publishes `settings.updated` on CATALOG; tracking
 * (smoothing, history retention) and reporting (zones, missing) keep replicas.
 */
import { z } from "zod";
import { MAX_ID } from "./common.ts";

const seconds = z.number().int().min(0).max(MAX_ID);

export const OrgSettingsView = z
  .object({
    /** Repeated reads at the asset's location within this long of its last history row add no history row (0: off). */
    smoothing_window_s: seconds,
    /** zone.entered / zone.exited fire after the asset has stayed this long (debounce). */
    zone_min_stay_s: seconds,
    /** asset.missing when an asset is not seen for this long (0: off). */
    missing_after_s: seconds,
    /** History rows older than this many days are removed (null: kept forever). */
    history_retention_days: seconds.nullable(),
  })
  .meta({ id: "OrgSettings" });
export type OrgSettingsView = z.infer<typeof OrgSettingsView>;

export const DEFAULT_ORG_SETTINGS: OrgSettingsView = {
  smoothing_window_s: 0,
  zone_min_stay_s: 60,
  missing_after_s: 0,
  history_retention_days: null,
};

/** JSON Merge Patch of the settings: every key optional, only history_retention_days nullable; unknown keys are 400 unknown_field. */
export const OrgSettingsPatch = z
  .object({
    smoothing_window_s: seconds.optional(),
    zone_min_stay_s: seconds.optional(),
    missing_after_s: seconds.optional(),
    history_retention_days: seconds.nullable().optional(),
  })
  .strict()
  .meta({ id: "OrgSettingsPatch" });
export type OrgSettingsPatch = z.infer<typeof OrgSettingsPatch>;

/** What the settings event carries: the settings and, as `id`, the organization. */
export const OrgSettingsRecord = OrgSettingsView.extend({ id: z.number().int().min(1).max(MAX_ID) });
export type OrgSettingsRecord = z.infer<typeof OrgSettingsRecord>;

export const SETTINGS_OPERATIONS = { get: "settings.get", update: "settings.update" } as const;
