/**
 * Tags: attach (POST .../tags), detach (DELETE .../tags/{tag_id}, a soft
 * delete), and the tags sent with a create. (tag_type, value) is unique per
 * organization among live tags, across assets and locations together.
 */
import { conflict, notFound, TagRequest, TAGS_PER_OWNER_MAX, type TagRecord, type TagView } from "@whereabouts/shared";
import { queryOne, uniqueViolation, type Db } from "../db/catalog-db.ts";
import type { OwnerType } from "../db/sql-fragments.ts";
import type { Emit, EventPublisher } from "../events/event-outbox.ts";
import { parseObject, requireObject, storedInstant, throwIfAny } from "../requests/body-parse.ts";
import { detachAllTags, detachTag, insertTag, TAG_LIVE_UNIQUE_INDEX, type NewTag } from "./tag-store.ts";

export function tagView(record: TagRecord): TagView {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { owner_type, owner_id, deleted_at, ...view } = record;
  return view;
}

const OWNER_TABLE: Record<OwnerType, string> = { asset: "catalog.assets", location: "catalog.locations" };
const OWNER_NAME: Record<OwnerType, string> = { asset: "Asset", location: "Location" };

export const ownerNotFound = (owner: OwnerType, id: number) => notFound(`${OWNER_NAME[owner]} ${id} not found`);

/**
 * Locks a live owner against a concurrent delete; 404 when it is not live.
 * Attaching takes the stronger lock, so that concurrent attaches to one owner
 * count its tags one after the other.
 */
export async function lockOwner(
  db: Db,
  orgId: number,
  owner: OwnerType,
  ownerId: number,
  mode: "SHARE" | "NO KEY UPDATE" = "SHARE",
): Promise<void> {
  const row = await queryOne<{ id: number }>(
    db,
    `SELECT id FROM ${OWNER_TABLE[owner]} WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL FOR ${mode}`,
    [orgId, ownerId],
  );
  if (!row) throw ownerNotFound(owner, ownerId);
}

/** DECISIONS.md: an owner holds at most TAGS_PER_OWNER_MAX live tags in all; beyond is 409. */
async function checkTagRoom(tx: Db, orgId: number, owner: OwnerType, ownerId: number, adding: number): Promise<void> {
  const row = await queryOne<{ n: number }>(
    tx,
    `SELECT count(*)::int AS n FROM catalog.tags
      WHERE org_id = $1 AND owner_type = $2 AND owner_id = $3 AND deleted_at IS NULL`,
    [orgId, owner, ownerId],
  );
  if (row!.n + adding > TAGS_PER_OWNER_MAX) {
    throw conflict(
      `${OWNER_NAME[owner]} ${ownerId} already has ${row!.n} live tags; ${owner === "asset" ? "an asset" : "a location"} may hold at most ${TAGS_PER_OWNER_MAX} ` +
        "(detach one before attaching another)",
    );
  }
}

/** The tag row a tag request stores (attach, a create's tags, the bulk import). */
export const newTagRow = (tag: TagRequest): NewTag => ({
  tagType: tag.tag_type,
  value: tag.value,
  isActive: tag.is_active ?? true,
  validFrom: storedInstant(tag.valid_from),
  validTo: storedInstant(tag.valid_to) ?? null,
});

/** Inserts tags for an owner inside the caller's transaction, emitting `attached`. */
export async function attachTags(
  tx: Db,
  emit: Emit,
  orgId: number,
  owner: OwnerType,
  ownerId: number,
  tags: TagRequest[],
  options: { newOwner?: boolean } = {},
): Promise<TagRecord[]> {
  // An owner created in this transaction holds no tags yet: only the request's own count can exceed the room.
  if (!options.newOwner || tags.length > TAGS_PER_OWNER_MAX) await checkTagRoom(tx, orgId, owner, ownerId, tags.length);
  const out: TagRecord[] = [];
  for (const tag of tags) {
    let row;
    try {
      row = await insertTag(tx, orgId, owner, ownerId, newTagRow(tag));
    } catch (err) {
      if (uniqueViolation(err) === TAG_LIVE_UNIQUE_INDEX) {
        throw conflict(`A tag with tag_type '${tag.tag_type}' and value '${tag.value}' is already attached in this organization`);
      }
      throw err;
    }
    await emit({ entity: "tag", verb: "attached", orgId, version: row.version, data: row.record });
    out.push(row.record);
  }
  return out;
}

/** Detaches every live tag of an owner that is being deleted (same transaction). */
export async function detachOwnerTags(tx: Db, emit: Emit, orgId: number, owner: OwnerType, ownerId: number): Promise<void> {
  for (const row of await detachAllTags(tx, orgId, owner, ownerId)) {
    await emit({ entity: "tag", verb: "detached", orgId, version: row.version, data: row.record });
  }
}

export function createTagService(deps: { events: EventPublisher }) {
  const { events } = deps;
  return {
    async attach(orgId: number, owner: OwnerType, ownerId: number, body: unknown): Promise<TagView> {
      const parsed = parseObject(TagRequest, requireObject(body));
      throwIfAny(parsed.fields);
      const request = parsed.data!;
      return events.write(async (tx, emit) => {
        await lockOwner(tx, orgId, owner, ownerId, "NO KEY UPDATE");
        const [record] = await attachTags(tx, emit, orgId, owner, ownerId, [request]);
        return tagView(record!);
      });
    },

    async detach(orgId: number, owner: OwnerType, ownerId: number, tagId: number): Promise<void> {
      await events.write(async (tx, emit) => {
        await lockOwner(tx, orgId, owner, ownerId);
        const row = await detachTag(tx, orgId, owner, ownerId, tagId);
        if (!row) throw notFound(`Tag ${tagId} is not attached to ${owner} ${ownerId}`);
        await emit({ entity: "tag", verb: "detached", orgId, version: row.version, data: row.record });
      });
    },
  };
}
export type TagService = ReturnType<typeof createTagService>;
