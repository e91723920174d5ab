/** RPC endpoints `catalog.settings.*`: GET and PATCH /api/v1/orgs/me/settings. */
import { requireOrg, SETTINGS_OPERATIONS, type RpcHandler } from "@whereabouts/shared";
import type { SettingsService } from "../settings/settings-service.ts";
import { ok } from "./rpc-support.ts";

export function settingsHandlers(settings: SettingsService): Record<string, RpcHandler> {
  return {
    [SETTINGS_OPERATIONS.get]: async (request) => ok({ data: await settings.get(requireOrg(request.principal, "orgs/me")) }),
    [SETTINGS_OPERATIONS.update]: async (request) => ok({ data: await settings.update(requireOrg(request.principal, "orgs/me"), request.body) }),
  };
}
