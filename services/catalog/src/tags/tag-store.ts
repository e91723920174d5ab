/** Tag queries: attach (insert), detach (soft delete), owner cascade. */
import type { TagRecord } from "@whereabouts/shared";
import { query, queryOne, type Db } from "../db/catalog-db.ts";
import { nextUpdatedAt, NOW_MS, tagRecordJson, type OwnerType } from "../db/sql-fragments.ts";

export const TAG_LIVE_UNIQUE_INDEX = "tags_org_id_tag_type_value_live_key";

export interface NewTag {
  tagType: string;
  value: string;
  isActive: boolean;
  validFrom: string | undefined;
  validTo: string | null;
}

export interface TagRow {
  record: TagRecord;
  version: number;
}

export async function insertTag(db: Db, orgId: number, owner: OwnerType, ownerId: number, tag: NewTag): Promise<TagRow> {
  const row = await queryOne<TagRow>(
    db,
    `INSERT INTO catalog.tags AS t
       (org_id, owner_type, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, ${NOW_MS}), $8::timestamptz, ${NOW_MS}, ${NOW_MS})
     RETURNING ${tagRecordJson("t")} AS record, t.version`,
    [orgId, owner, ownerId, tag.tagType, tag.value, tag.isActive, tag.validFrom ?? null, tag.validTo],
  );
  return row!;
}

const DETACH = `deleted_at = date_trunc('milliseconds', clock_timestamp()), updated_at = ${nextUpdatedAt("t")}, version = t.version + 1`;

/** Detaches one live tag of this owner; undefined when there is none. */
export async function detachTag(db: Db, orgId: number, owner: OwnerType, ownerId: number, tagId: number) {
  return queryOne<TagRow>(
    db,
    `UPDATE catalog.tags AS t SET ${DETACH}
      WHERE t.org_id = $1 AND t.owner_type = $2 AND t.owner_id = $3 AND t.id = $4 AND t.deleted_at IS NULL
      RETURNING ${tagRecordJson("t")} AS record, t.version`,
    [orgId, owner, ownerId, tagId],
  );
}

/** Detaches every live tag of an owner being deleted, so their pairs become reusable. */
export async function detachAllTags(db: Db, orgId: number, owner: OwnerType, ownerId: number): Promise<TagRow[]> {
  const rows = await query<TagRow & { id: number }>(
    db,
    `UPDATE catalog.tags AS t SET ${DETACH}
      WHERE t.org_id = $1 AND t.owner_type = $2 AND t.owner_id = $3 AND t.deleted_at IS NULL
      RETURNING ${tagRecordJson("t")} AS record, t.version, t.id`,
    [orgId, owner, ownerId],
  );
  return rows.sort((a, b) => a.id - b.id);
}
