/**
 * Asset rules: create (auto-mint, tags, read-only location by presence), read,
 * list, PATCH (merge patch with accept-if-matches echoes), rename, soft delete.
 */
import {
  AssetCreateRequest,
  AssetPatchRequest,
  conflict,
  dataEnvelopeJson,
  listEnvelopeJson,
  notFound,
  RenameRequest,
  TAGS_PER_OWNER_MAX,
  type AssetView,
  type FieldError,
  type JsonText,
  type SortKey,
  type Page,
} from "@whereabouts/shared";
import { uniqueViolation } from "../db/catalog-db.ts";
import { listRecords } from "../requests/list-query.ts";
import { mintExternalKey } from "../db/key-sequence.ts";
import type { Emit, EventInput, EventPublisher } from "../events/event-outbox.ts";
import type { Tx } from "../db/catalog-db.ts";
import {
  jsonEqual,
  parseObject,
  readOnlyError,
  requireObject,
  storedInstant,
  throwIfAny,
  type JsonObject,
} from "../requests/body-parse.ts";
import { coalescedFinds } from "../db/coalesced-finds.ts";
import { createCountCache } from "../requests/count-cache.ts";
import { createPageCache } from "../requests/page-cache.ts";
import { ASSET_LOCATION_READ_ONLY, checkEchoes } from "../requests/read-only-echo.ts";
import { attachTags, detachOwnerTags, newTagRow } from "../tags/tag-service.ts";
import {
  findAsset,
  findAssets,
  insertAsset,
  insertAssetAtOnce,
  ASSET_LIST,
  loadAsset,
  lockAsset,
  renameAsset,
  softDeleteAsset,
  updateAsset,
  type AssetChanges,
  type AssetFilters,
  type AssetSortField,
  type NewAsset,
} from "./asset-store.ts";

export const ASSET_LIVE_UNIQUE_INDEX = "assets_org_id_external_key_live_key";

const SERVER_MANAGED = ["id", "created_at", "updated_at", "deleted_at"] as const;
const LOCATION_FIELDS = ["location_id", "location_external_key"] as const;

const assetNotFound = (id: number) => notFound(`Asset ${id} not found`);
const keyTaken = (key: string) => conflict(`An asset with external_key '${key}' already exists`);

const has = (body: JsonObject, key: string) => Object.prototype.hasOwnProperty.call(body, key);

export function createAssetService(deps: { events: EventPublisher; db: Parameters<typeof findAsset>[0] }) {
  const { events, db } = deps;
  const counts = createCountCache();
  // Asset views show positions: the position consumer tells it of moves (positionsMoved).
  const pages = createPageCache();
  // GETs by id that arrive together share a statement (coalesced-finds.ts).
  const findView = coalescedFinds({ find: (orgId, id) => findAsset(db, orgId, id), findMany: (orgId, ids) => findAssets(db, orgId, ids) });

  /** A new asset: its id and its view (JSON text). */
  async function create(orgId: number, body: unknown): Promise<{ id: number; view: string }> {
    const raw = requireObject(body);
    // Read-only on create: the location pair is rejected by presence, as are
    // the server-managed fields (a new row has no value they could match).
    const readOnly: FieldError[] = [];
    const rest: JsonObject = { ...raw };
    for (const key of [...SERVER_MANAGED, ...LOCATION_FIELDS]) {
      if (!has(raw, key)) continue;
      delete rest[key];
      readOnly.push(
        readOnlyError(
          key,
          (LOCATION_FIELDS as readonly string[]).includes(key)
            ? `${key} ${ASSET_LOCATION_READ_ONLY}`
            : `${key} is read-only: it is server-managed and cannot be set`,
        ),
      );
    }
    const parsed = parseObject(AssetCreateRequest, rest);
    throwIfAny([...parsed.fields, ...readOnly]);
    const request = parsed.data!;

    for (let attempt = 0; ; attempt++) {
      try {
        const externalKey = request.external_key ?? (await mintExternalKey(db, orgId, "asset"));
        if ((request.tags?.length ?? 0) <= TAGS_PER_OWNER_MAX) {
          // The usual create in one statement; one that breaks a uniqueness rule goes the way below,
          // whose statements name the key or the tag taken.
          try {
            return await events.writeAtOnce(async (pool) => {
              const { id, view, events } = await insertAssetAtOnce(pool, orgId, { ...newAssetRow(request, externalKey), tags: (request.tags ?? []).map(newTagRow) });
              return { value: { id, view }, events };
            });
          } catch (err) {
            if (uniqueViolation(err) === undefined) throw err;
          }
        }
        const view = await events.write((tx, emit) => insertAssetRecord(tx, emit, orgId, request, externalKey));
        return { id: view.id, view: JSON.stringify(view) };
      } catch (err) {
        // A minted key raced a caller's concurrent insert of the same key: mint again.
        if (request.external_key === undefined && uniqueViolation(err) === ASSET_LIVE_UNIQUE_INDEX && attempt < 5) continue;
        throw err;
      }
    }
  }

  /** `{data: asset}` as JSON text, straight from Postgres. */
  async function get(orgId: number, id: number): Promise<JsonText> {
    const view = await findView(orgId, id);
    if (!view) throw assetNotFound(id);
    return dataEnvelopeJson(view);
  }

  async function list(
    orgId: number,
    filters: AssetFilters,
    sort: SortKey<AssetSortField>[],
    page: Page,
    catalogSeq: number | undefined,
  ): Promise<JsonText> {
    const { data, total } = await listRecords(db, ASSET_LIST, orgId, filters, sort, page, { cache: counts, pages, catalogSeq });
    return listEnvelopeJson(data, page, total);
  }

  async function update(orgId: number, id: number, body: unknown): Promise<AssetView> {
    const raw = requireObject(body);
    return events.write(async (tx, emit) => (await patchAssetRecord(tx, emit, orgId, id, raw)).view);
  }

  async function rename(orgId: number, id: number, body: unknown): Promise<{ data: AssetView; descendant_count_affected: number }> {
    const parsed = parseObject(RenameRequest, requireObject(body));
    throwIfAny(parsed.fields);
    const { external_key: key } = parsed.data!;
    const data = await events.write(async (tx, emit) => {
      const state = await lockAsset(tx, orgId, id);
      if (!state) throw assetNotFound(id);
      if (state.view.external_key === key) return state.view;
      try {
        await renameAsset(tx, orgId, id, key);
      } catch (err) {
        if (uniqueViolation(err) === ASSET_LIVE_UNIQUE_INDEX) throw keyTaken(key);
        throw err;
      }
      const renamed = await loadAsset(tx, orgId, id);
      await emit({ entity: "asset", verb: "renamed", orgId, version: renamed.version, data: renamed.view });
      return renamed.view;
    });
    return { data, descendant_count_affected: 0 };
  }

  async function remove(orgId: number, id: number): Promise<void> {
    await events.write(async (tx, emit) => {
      const state = await lockAsset(tx, orgId, id);
      if (!state) throw assetNotFound(id);
      await detachOwnerTags(tx, emit, orgId, "asset", id);
      await softDeleteAsset(tx, orgId, id);
      const deleted = await loadAsset(tx, orgId, id);
      await emit({ entity: "asset", verb: "deleted", orgId, version: deleted.version, data: deleted.view });
    });
  }

  return { create, get, list, update, rename, remove, positionsMoved: pages.positionsMoved };
}
export type AssetService = ReturnType<typeof createAssetService>;

/**
 * The PATCH rules on a locked asset, in the caller's transaction: echoes of
 * read-only fields, then only what differs is written (and announced).
 * Shared by PATCH and the bulk upload's updates.
 */
export async function patchAssetRecord(tx: Tx, emit: Emit, orgId: number, id: number, raw: JsonObject): Promise<{ view: AssetView; changed: boolean }> {
  const parsed = parseObject(AssetPatchRequest, raw);
  const state = await lockAsset(tx, orgId, id);
  if (!state) throw assetNotFound(id);
  const current = state.view;
  const sent = (key: string) => has(raw, key) && !parsed.failed.has(key);

  const errors = [...parsed.fields, ...checkEchoes(raw, current, "assets", parsed.failed)];
  for (const key of LOCATION_FIELDS) {
    if (sent(key) && raw[key] !== current[key]) errors.push(readOnlyError(key, `${key} ${ASSET_LOCATION_READ_ONLY}`));
  }
  throwIfAny(errors);

  const patch = parsed.data!;
  const changes: AssetChanges = {};
  if (patch.name !== undefined && patch.name !== current.name) changes.name = patch.name;
  if (patch.description !== undefined && patch.description !== current.description) changes.description = patch.description;
  if (patch.is_active !== undefined && patch.is_active !== current.is_active) changes.is_active = patch.is_active;
  if (patch.metadata !== undefined && !jsonEqual(patch.metadata, current.metadata)) {
    changes.metadata = patch.metadata as Record<string, unknown>;
  }
  const validFrom = storedInstant(patch.valid_from);
  if (validFrom !== undefined && validFrom !== null && validFrom !== state.valid_from_us) changes.valid_from = validFrom;
  const validTo = storedInstant(patch.valid_to);
  if (validTo !== undefined && validTo !== state.valid_to_us) changes.valid_to = validTo;

  // Rule 3 and 10: nothing to change answers the record as it is.
  if (Object.keys(changes).length === 0) return { view: current, changed: false };
  await updateAsset(tx, orgId, id, changes);
  const updated = await loadAsset(tx, orgId, id);
  await emit({ entity: "asset", verb: "updated", orgId, version: updated.version, data: updated.view });
  return { view: updated.view, changed: true };
}

/** The asset row a create request stores (the API's create and the bulk import alike). */
export function newAssetRow(request: AssetCreateRequest, externalKey: string): NewAsset {
  return {
    externalKey,
    name: request.name,
    description: request.description ?? null,
    isActive: request.is_active ?? true,
    metadata: (request.metadata as Record<string, unknown> | undefined) ?? {},
    validFrom: storedInstant(request.valid_from),
    validTo: storedInstant(request.valid_to) ?? null,
  };
}

/** A new asset with its tags, in the caller's transaction: `created` (carrying the tags), then each `attached`. */
export async function insertAssetRecord(tx: Tx, emit: Emit, orgId: number, request: AssetCreateRequest, externalKey: string): Promise<AssetView> {
  const id = await insertAsset(tx, orgId, newAssetRow(request, externalKey)).catch((err: unknown) => {
    if (uniqueViolation(err) === ASSET_LIVE_UNIQUE_INDEX && request.external_key !== undefined) {
      throw keyTaken(externalKey);
    }
    throw err;
  });
  // The tags first, then one read of the record: `created` carries them
  // (as it would after any later change), followed by their `attached`.
  const tagEvents: EventInput[] = [];
  if (request.tags?.length) {
    await attachTags(tx, async (event) => void tagEvents.push(event), orgId, "asset", id, request.tags, { newOwner: true });
  }
  const created = await loadAsset(tx, orgId, id);
  await emit({ entity: "asset", verb: "created", orgId, version: created.version, data: created.view });
  for (const event of tagEvents) await emit(event);
  return created.view;
}
