/**
 * Organization settings (EXTENSIONS.md section 5): read with the defaults
 * filled in, changed by JSON Merge Patch; every change is a `settings.updated`
 * event for the services that act on them (tracking, reporting).
 */
import {
  DEFAULT_ORG_SETTINGS,
  OrgSettingsPatch,
  parseBody,
  type OrgSettingsView,
} from "@whereabouts/shared";
import { query, queryOne, type Db } from "../db/catalog-db.ts";
import type { EventPublisher } from "../events/event-outbox.ts";

const COLUMNS = "smoothing_window_s, zone_min_stay_s, missing_after_s, history_retention_days";

export function createSettingsService(deps: { db: Db; events: EventPublisher }) {
  async function read(db: Db, orgId: number): Promise<OrgSettingsView> {
    const row = await queryOne<OrgSettingsView>(db, `SELECT ${COLUMNS} FROM catalog.org_settings WHERE org_id = $1`, [orgId]);
    return row ?? { ...DEFAULT_ORG_SETTINGS };
  }

  return {
    get: (orgId: number) => read(deps.db, orgId),

    async update(orgId: number, body: unknown): Promise<OrgSettingsView> {
      const patch = parseBody(OrgSettingsPatch, body);
      return deps.events.write(async (tx, emit) => {
        const current = await read(tx, orgId);
        const next: OrgSettingsView = { ...current, ...patch };
        const changed = (Object.keys(next) as Array<keyof OrgSettingsView>).some((k) => next[k] !== current[k]);
        if (!changed) return current;
        const [row] = await query<OrgSettingsView & { version: number }>(
          tx,
          `INSERT INTO catalog.org_settings AS s (org_id, ${COLUMNS}) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (org_id) DO UPDATE SET
             smoothing_window_s = EXCLUDED.smoothing_window_s, zone_min_stay_s = EXCLUDED.zone_min_stay_s,
             missing_after_s = EXCLUDED.missing_after_s, history_retention_days = EXCLUDED.history_retention_days,
             version = s.version + 1, updated_at = now()
           RETURNING ${COLUMNS}, version`,
          [orgId, next.smoothing_window_s, next.zone_min_stay_s, next.missing_after_s, next.history_retention_days],
        );
        const { version, ...settings } = row!;
        await emit({ entity: "settings", verb: "updated", orgId, version, data: { id: orgId, ...settings } });
        return settings;
      });
    },
  };
}
export type SettingsService = ReturnType<typeof createSettingsService>;
