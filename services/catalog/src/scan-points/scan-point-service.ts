/**
 * Scan point rules: create (location by either form), read, list, PATCH
 * (merge patch, read-only echoes), soft delete. One live mapping per
 * (source, antenna) in an organization, a null antenna being the source's
 * default (409 otherwise). Every change is a `scan_point.*` catalog event,
 * which tracking's replica resolves scans through.
 */
import {
  conflict,
  dataEnvelopeJson,
  fieldError,
  listEnvelopeJson,
  notFound,
  ScanPointCreateRequest,
  ScanPointPatchRequest,
  ValidationError,
  type FieldError,
  type JsonText,
  type ScanPointView,
  type SortKey,
  type Page,
} from "@whereabouts/shared";
import { uniqueViolation, type Db } from "../db/catalog-db.ts";
import { listRecords } from "../requests/list-query.ts";
import type { EventPublisher } from "../events/event-outbox.ts";
import { resolveParent } from "../locations/location-store.ts";
import { parseObject, readOnlyError, requireObject, storedInstant, throwIfAny, type JsonObject } from "../requests/body-parse.ts";
import { checkEchoes } from "../requests/read-only-echo.ts";
import {
  findScanPoint,
  insertScanPoint,
  SCAN_POINT_LIST,
  loadScanPoint,
  lockScanPoint,
  SCAN_POINT_LIVE_UNIQUE_INDEX,
  softDeleteScanPoint,
  updateScanPoint,
  type ScanPointChanges,
  type ScanPointFilters,
  type ScanPointSortField,
} from "./scan-point-store.ts";

const SERVER_MANAGED = ["id", "created_at", "updated_at", "deleted_at"] as const;
const LOCATION_FIELDS = ["location_id", "location_external_key"] as const;

const scanPointNotFound = (id: number) => notFound(`Scan point ${id} not found`);
const has = (body: JsonObject, key: string) => Object.prototype.hasOwnProperty.call(body, key);

function pairTaken(source: string, antenna: number | null) {
  const which = antenna === null ? "the default mapping (antenna null)" : `antenna ${antenna}`;
  return conflict(`A live scan point for source '${source}' with ${which} already exists`);
}

const locationNotFound = (field: string, value: unknown) =>
  fieldError(field, "fk_not_found", `${field} ${JSON.stringify(value)} does not match a live location`);

/** The live location the form(s) sent name; fk_not_found / ambiguous_fields otherwise. */
async function resolveLocationRefs(
  tx: Db,
  orgId: number,
  sent: { location_id?: number | undefined; location_external_key?: string | undefined },
): Promise<number> {
  const fields: FieldError[] = [];
  let byId: number | undefined;
  let byKey: number | undefined;
  if (sent.location_id !== undefined) {
    byId = await resolveParent(tx, orgId, { id: sent.location_id });
    if (byId === undefined) fields.push(locationNotFound("location_id", sent.location_id));
  }
  if (sent.location_external_key !== undefined) {
    byKey = await resolveParent(tx, orgId, { key: sent.location_external_key });
    if (byKey === undefined) fields.push(locationNotFound("location_external_key", sent.location_external_key));
  }
  throwIfAny(fields);
  if (byId !== undefined && byKey !== undefined && byId !== byKey) {
    throw new ValidationError(
      LOCATION_FIELDS.map((field) => fieldError(field, "ambiguous_fields", "location_id and location_external_key name different locations; send one form")),
    );
  }
  return (byId ?? byKey)!;
}

export function createScanPointService(deps: { events: EventPublisher; db: Db }) {
  const { events, db } = deps;

  async function create(orgId: number, body: unknown): Promise<ScanPointView> {
    const raw = requireObject(body);
    const rest: JsonObject = { ...raw };
    const readOnly: FieldError[] = [];
    for (const key of SERVER_MANAGED) {
      if (!has(raw, key)) continue;
      delete rest[key];
      readOnly.push(readOnlyError(key, `${key} is read-only: it is server-managed and cannot be set`));
    }
    const parsed = parseObject(ScanPointCreateRequest, rest);
    const errors = [...parsed.fields, ...readOnly];
    if (has(raw, "location_id") && has(raw, "location_external_key")) {
      const message = "location_id and location_external_key are mutually exclusive; send one form";
      for (const field of LOCATION_FIELDS) {
        if (!errors.some((e) => e.field === field)) errors.push(fieldError(field, "ambiguous_fields", message));
      }
    } else if (!has(raw, "location_id") && !has(raw, "location_external_key")) {
      errors.push(fieldError("location_id", "required", "location_id or location_external_key is required"));
    }
    throwIfAny(errors);
    const request = parsed.data!;
    const antenna = request.antenna ?? null;

    return events.write(async (tx, emit) => {
      const locationId = await resolveLocationRefs(tx, orgId, request);
      const id = await insertScanPoint(tx, orgId, {
        source: request.source,
        antenna,
        locationId,
        validFrom: storedInstant(request.valid_from),
        validTo: storedInstant(request.valid_to) ?? null,
      }).catch((err: unknown) => {
        if (uniqueViolation(err) === SCAN_POINT_LIVE_UNIQUE_INDEX) throw pairTaken(request.source, antenna);
        throw err;
      });
      const created = await loadScanPoint(tx, orgId, id);
      await emit({ entity: "scan_point", verb: "created", orgId, version: created.version, data: created.view });
      return created.view;
    });
  }

  async function get(orgId: number, id: number): Promise<JsonText> {
    const view = await findScanPoint(db, orgId, id);
    if (!view) throw scanPointNotFound(id);
    return dataEnvelopeJson(view);
  }

  async function list(orgId: number, filters: ScanPointFilters, sort: SortKey<ScanPointSortField>[], page: Page): Promise<JsonText> {
    const { data, total } = await listRecords(db, SCAN_POINT_LIST, orgId, filters, sort, page);
    return listEnvelopeJson(data, page, total);
  }

  async function update(orgId: number, id: number, body: unknown): Promise<ScanPointView> {
    const raw = requireObject(body);
    const parsed = parseObject(ScanPointPatchRequest, raw);
    return events.write(async (tx, emit) => {
      const state = await lockScanPoint(tx, orgId, id);
      if (!state) throw scanPointNotFound(id);
      const current = state.view;
      const echoTarget = { ...current, external_key: "", tags: [] };
      throwIfAny([...parsed.fields, ...checkEchoes(raw, echoTarget, "scan-points", parsed.failed)]);

      const patch = parsed.data!;
      const changes: ScanPointChanges = {};
      if (patch.location_id !== undefined || patch.location_external_key !== undefined) {
        const locationId = await resolveLocationRefs(tx, orgId, patch);
        if (locationId !== current.location_id) changes.location_id = locationId;
      }
      if (patch.source !== undefined && patch.source !== current.source) changes.source = patch.source;
      if (patch.antenna !== undefined && patch.antenna !== current.antenna) changes.antenna = patch.antenna;
      const validFrom = storedInstant(patch.valid_from);
      if (validFrom !== undefined && validFrom !== state.valid_from_us) changes.valid_from = validFrom;
      const validTo = storedInstant(patch.valid_to);
      if (validTo !== undefined && validTo !== state.valid_to_us) changes.valid_to = validTo;

      if (Object.keys(changes).length === 0) return current;
      try {
        await updateScanPoint(tx, orgId, id, changes);
      } catch (err) {
        if (uniqueViolation(err) === SCAN_POINT_LIVE_UNIQUE_INDEX) {
          throw pairTaken(changes.source ?? current.source, changes.antenna !== undefined ? changes.antenna : current.antenna);
        }
        throw err;
      }
      const updated = await loadScanPoint(tx, orgId, id);
      await emit({ entity: "scan_point", verb: "updated", orgId, version: updated.version, data: updated.view });
      return updated.view;
    });
  }

  async function remove(orgId: number, id: number): Promise<void> {
    await events.write(async (tx, emit) => {
      const state = await lockScanPoint(tx, orgId, id);
      if (!state) throw scanPointNotFound(id);
      await softDeleteScanPoint(tx, orgId, id);
      const deleted = await loadScanPoint(tx, orgId, id);
      await emit({ entity: "scan_point", verb: "deleted", orgId, version: deleted.version, data: deleted.view });
    });
  }

  return { create, get, list, update, remove };
}
export type ScanPointService = ReturnType<typeof createScanPointService>;
