import { z } from "zod";
import { Id, Timestamp } from "./common.ts";

export const AssetLocationItem = z.object({
  asset_id: Id,
  asset_external_key: z.string(),
  location_id: Id.nullable(),
  location_external_key: z.string().nullable(),
  asset_deleted_at: Timestamp.nullable(),
  asset_last_seen: Timestamp,
});
export type AssetLocationItem = z.infer<typeof AssetLocationItem>;
