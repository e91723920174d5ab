/**
 * Location rules: create (auto-mint, parent by either form, tags), read, list,
 * PATCH (merge patch, re-parenting with cycle refusal), rename, soft delete
 * (blocked by live descendants, then by placed assets), and the tree views.
 */
import {
  conflict,
  dataEnvelopeJson,
  fieldError,
  listEnvelopeJson,
  LocationCreateRequest,
  LocationPatchRequest,
  notFound,
  RenameRequest,
  ValidationError,
  type FieldError,
  type JsonText,
  type LocationView,
  type SortKey,
  type Page,
} from "@whereabouts/shared";
import { uniqueViolation, type Db } from "../db/catalog-db.ts";
import { listRecords } from "../requests/list-query.ts";
import { mintExternalKey } from "../db/key-sequence.ts";
import type { EventInput, EventPublisher } from "../events/event-outbox.ts";
import { hasPlacedAssets } from "../assets/asset-store.ts";
import { parseObject, readOnlyError, requireObject, storedInstant, throwIfAny, type JsonObject } from "../requests/body-parse.ts";
import { createCountCache } from "../requests/count-cache.ts";
import { createPageCache } from "../requests/page-cache.ts";
import { checkEchoes } from "../requests/read-only-echo.ts";
import { attachTags, detachOwnerTags } from "../tags/tag-service.ts";
import {
  countDescendants,
  findLocation,
  hasLiveChildren,
  insertLocation,
  isSelfOrDescendant,
  LOCATION_LIST,
  loadLocation,
  lockLocation,
  lockTree,
  renameLocation,
  resolveParent,
  softDeleteLocation,
  treePage,
  updateLocation,
  type LocationChanges,
  type LocationFilters,
  type LocationSortField,
  type TreeView,
} from "./location-store.ts";

export const LOCATION_LIVE_UNIQUE_INDEX = "locations_org_id_external_key_live_key";

const SERVER_MANAGED = ["id", "created_at", "updated_at", "deleted_at"] as const;
const PARENT_FIELDS = ["parent_id", "parent_external_key"] as const;

export const DETAIL_HAS_DESCENDANTS =
  "The location has descendant locations; reassign or remove them first (cascade delete is not supported)";
export const DETAIL_HAS_ASSETS =
  "The location has assets placed at it; move or remove them first (cascade delete is not supported)";

const locationNotFound = (id: number) => notFound(`Location ${id} not found`);
const keyTaken = (key: string) => conflict(`A location with external_key '${key}' already exists`);
const has = (body: JsonObject, key: string) => Object.prototype.hasOwnProperty.call(body, key);

const ambiguousParent = (): FieldError[] =>
  PARENT_FIELDS.map((field) =>
    fieldError(field, "ambiguous_fields", "parent_id and parent_external_key name different parents; send one form"),
  );

const parentNotFound = (field: string, value: unknown) =>
  fieldError(field, "fk_not_found", `${field} ${JSON.stringify(value)} does not match a live location`);

/** Resolves the parent form(s) sent to a live location id (null: root). */
async function resolveParentRefs(
  tx: Db,
  orgId: number,
  sent: { parent_id?: number | null; parent_external_key?: string | null },
): Promise<number | null> {
  const fields: FieldError[] = [];
  let byId: number | null | undefined;
  let byKey: number | null | undefined;
  if (sent.parent_id !== undefined) {
    byId = sent.parent_id === null ? null : await resolveParent(tx, orgId, { id: sent.parent_id });
    if (byId === undefined) fields.push(parentNotFound("parent_id", sent.parent_id));
  }
  if (sent.parent_external_key !== undefined) {
    byKey = sent.parent_external_key === null ? null : await resolveParent(tx, orgId, { key: sent.parent_external_key });
    if (byKey === undefined) fields.push(parentNotFound("parent_external_key", sent.parent_external_key));
  }
  throwIfAny(fields);
  if (sent.parent_id !== undefined && sent.parent_external_key !== undefined && byId !== byKey) {
    throw new ValidationError(ambiguousParent());
  }
  return (sent.parent_id !== undefined ? byId : byKey) ?? null;
}

export function createLocationService(deps: { events: EventPublisher; db: Db }) {
  const { events, db } = deps;
  const counts = createCountCache();
  const pages = createPageCache();

  async function create(orgId: number, body: unknown): Promise<LocationView> {
    const raw = requireObject(body);
    const readOnly: FieldError[] = [];
    const rest: JsonObject = { ...raw };
    for (const key of SERVER_MANAGED) {
      if (!has(raw, key)) continue;
      delete rest[key];
      readOnly.push(readOnlyError(key, `${key} is read-only: it is server-managed and cannot be set`));
    }
    const parsed = parseObject(LocationCreateRequest, rest);
    const errors = [...parsed.fields, ...readOnly];
    // Paired-key matrix: both forms on POST are ambiguous, whatever their values.
    if (has(raw, "parent_id") && has(raw, "parent_external_key")) {
      const message = "parent_id and parent_external_key are mutually exclusive on create; send one form";
      for (const field of PARENT_FIELDS) {
        if (!errors.some((e) => e.field === field)) errors.push(fieldError(field, "ambiguous_fields", message));
      }
    }
    throwIfAny(errors);
    const request = parsed.data!;

    for (let attempt = 0; ; attempt++) {
      try {
        const externalKey = request.external_key ?? (await mintExternalKey(db, orgId, "location"));
        return await events.write(async (tx, emit) => {
          const parentId = await resolveParentRefs(tx, orgId, request);
          const id = await insertLocation(tx, orgId, {
            externalKey,
            name: request.name,
            description: request.description ?? null,
            isActive: request.is_active ?? true,
            parentId,
            isZone: request.is_zone ?? false,
            maxDwellS: request.max_dwell_s ?? null,
            validFrom: storedInstant(request.valid_from),
            validTo: storedInstant(request.valid_to) ?? null,
          }).catch((err: unknown) => {
            if (uniqueViolation(err) === LOCATION_LIVE_UNIQUE_INDEX && request.external_key !== undefined) {
              throw keyTaken(externalKey);
            }
            throw err;
          });
          // As for assets: the tags first, then one read; `created` carries them.
          const tagEvents: EventInput[] = [];
          if (request.tags?.length) {
            await attachTags(tx, async (event) => void tagEvents.push(event), orgId, "location", id, request.tags, { newOwner: true });
          }
          const created = await loadLocation(tx, orgId, id);
          await emit({ entity: "location", verb: "created", orgId, version: created.version, data: created.view });
          for (const event of tagEvents) await emit(event);
          return created.view;
        });
      } catch (err) {
        if (request.external_key === undefined && uniqueViolation(err) === LOCATION_LIVE_UNIQUE_INDEX && attempt < 5) continue;
        throw err;
      }
    }
  }

  /** `{data: location}` as JSON text, straight from Postgres. */
  async function get(orgId: number, id: number): Promise<JsonText> {
    const view = await findLocation(db, orgId, id);
    if (!view) throw locationNotFound(id);
    return dataEnvelopeJson(view);
  }

  async function list(
    orgId: number,
    filters: LocationFilters,
    sort: SortKey<LocationSortField>[],
    page: Page,
    catalogSeq: number | undefined,
  ): Promise<JsonText> {
    const { data, total } = await listRecords(db, LOCATION_LIST, orgId, filters, sort, page, { cache: counts, pages, catalogSeq });
    return listEnvelopeJson(data, page, total);
  }

  async function update(orgId: number, id: number, body: unknown): Promise<LocationView> {
    const raw = requireObject(body);
    const parsed = parseObject(LocationPatchRequest, raw);
    const reparent = PARENT_FIELDS.some((f) => has(raw, f));
    return events.write(async (tx, emit) => {
      if (reparent) await lockTree(tx, orgId);
      const state = await lockLocation(tx, orgId, id);
      if (!state) throw locationNotFound(id);
      const current = state.view;

      const errors = [...parsed.fields, ...checkEchoes(raw, current, "locations", parsed.failed)];
      const bothSent = PARENT_FIELDS.every((f) => has(raw, f) && !parsed.failed.has(f));
      if (bothSent && (raw.parent_id === null) !== (raw.parent_external_key === null)) errors.push(...ambiguousParent());
      throwIfAny(errors);

      const patch = parsed.data!;
      const changes: LocationChanges = {};
      if (patch.parent_id !== undefined || patch.parent_external_key !== undefined) {
        // Rule 8: references are checked after the accept-if-matches step.
        const parentId = await resolveParentRefs(tx, orgId, patch);
        if (parentId !== current.parent_id) {
          if (parentId !== null && (await isSelfOrDescendant(tx, orgId, id, parentId))) {
            throw new ValidationError(
              PARENT_FIELDS.filter((f) => patch[f] !== undefined).map((field) =>
                fieldError(field, "invalid_value", `${field} would place the location under itself or one of its descendants`),
              ),
            );
          }
          changes.parent_id = parentId;
        }
      }
      if (patch.name !== undefined && patch.name !== current.name) changes.name = patch.name;
      if (patch.description !== undefined && patch.description !== current.description) changes.description = patch.description;
      if (patch.is_active !== undefined && patch.is_active !== current.is_active) changes.is_active = patch.is_active;
      if (patch.is_zone !== undefined && patch.is_zone !== current.is_zone) changes.is_zone = patch.is_zone;
      if (patch.max_dwell_s !== undefined && patch.max_dwell_s !== current.max_dwell_s) changes.max_dwell_s = patch.max_dwell_s;
      const validFrom = storedInstant(patch.valid_from);
      if (validFrom !== undefined && validFrom !== null && validFrom !== state.valid_from_us) changes.valid_from = validFrom;
      const validTo = storedInstant(patch.valid_to);
      if (validTo !== undefined && validTo !== state.valid_to_us) changes.valid_to = validTo;

      if (Object.keys(changes).length === 0) return current;
      await updateLocation(tx, orgId, id, changes);
      const updated = await loadLocation(tx, orgId, id);
      await emit({ entity: "location", verb: "updated", orgId, version: updated.version, data: updated.view });
      return updated.view;
    });
  }

  async function rename(orgId: number, id: number, body: unknown): Promise<{ data: LocationView; descendant_count_affected: number }> {
    const parsed = parseObject(RenameRequest, requireObject(body));
    throwIfAny(parsed.fields);
    const { external_key: key } = parsed.data!;
    return events.write(async (tx, emit) => {
      const state = await lockLocation(tx, orgId, id);
      if (!state) throw locationNotFound(id);
      if (state.view.external_key === key) return { data: state.view, descendant_count_affected: 0 };
      try {
        await renameLocation(tx, orgId, id, key);
      } catch (err) {
        if (uniqueViolation(err) === LOCATION_LIVE_UNIQUE_INDEX) throw keyTaken(key);
        throw err;
      }
      const renamed = await loadLocation(tx, orgId, id);
      await emit({ entity: "location", verb: "renamed", orgId, version: renamed.version, data: renamed.view });
      return { data: renamed.view, descendant_count_affected: await countDescendants(tx, orgId, id) };
    });
  }

  async function remove(orgId: number, id: number): Promise<void> {
    await events.write(async (tx, emit) => {
      const state = await lockLocation(tx, orgId, id);
      if (!state) throw locationNotFound(id);
      if (await hasLiveChildren(tx, orgId, id)) throw conflict(DETAIL_HAS_DESCENDANTS);
      if (await hasPlacedAssets(tx, orgId, id)) throw conflict(DETAIL_HAS_ASSETS);
      await detachOwnerTags(tx, emit, orgId, "location", id);
      await softDeleteLocation(tx, orgId, id);
      const deleted = await loadLocation(tx, orgId, id);
      await emit({ entity: "location", verb: "deleted", orgId, version: deleted.version, data: deleted.view });
    });
  }

  async function tree(orgId: number, id: number, view: TreeView, page: Page): Promise<JsonText> {
    if (!(await findLocation(db, orgId, id))) throw locationNotFound(id);
    const { data, total } = await treePage(db, orgId, id, view, page);
    return listEnvelopeJson(data, page, total);
  }

  return { create, get, list, update, rename, remove, tree };
}
export type LocationService = ReturnType<typeof createLocationService>;
