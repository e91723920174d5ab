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

/** Many new tags in one statement (the bulk upload); rows come back with their owner. */
export async function insertTags(db: Db, orgId: number, owner: OwnerType, items: Array<{ ownerId: number; tag: NewTag }>): Promise<Array<TagRow & { owner_id: number }>> {
  if (!items.length) return [];
  return query<TagRow & { owner_id: number }>(
    db,
    `INSERT INTO catalog.tags AS t
       (org_id, owner_type, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at, updated_at)
     SELECT $1, $2, r.owner_id, r.tag_type, r.value, r.is_active, COALESCE(r.valid_from::timestamptz, ${NOW_MS}), r.valid_to::timestamptz, ${NOW_MS}, ${NOW_MS}
       FROM unnest($3::int[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[]) AS r(owner_id, tag_type, value, is_active, valid_from, valid_to)
     RETURNING ${tagRecordJson("t")} AS record, t.version, t.owner_id`,
    [
      orgId,
      owner,
      items.map((i) => i.ownerId),
      items.map((i) => i.tag.tagType),
      items.map((i) => i.tag.value),
      items.map((i) => i.tag.isActive),
      items.map((i) => i.tag.validFrom ?? null),
      items.map((i) => i.tag.validTo),
    ],
  );
}

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
