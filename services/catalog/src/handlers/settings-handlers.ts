/** RPC endpoints `catalog.settings.*`: GET and PATCH /api/v1/orgs/me/settings. */
import { SETTINGS_OPERATIONS, type RpcHandler } from "@whereabouts/shared";
import { settingsOrg, type SettingsService } from "../settings/settings-service.ts";
import { ok } from "./rpc-support.ts";

export function settingsHandlers(settings: SettingsService): Record<string, RpcHandler> {
  return {
    [SETTINGS_OPERATIONS.get]: async (request) => ok({ data: await settings.get(settingsOrg(request.principal)) }),
    [SETTINGS_OPERATIONS.update]: async (request) => ok({ data: await settings.update(settingsOrg(request.principal), request.body) }),
  };
}
