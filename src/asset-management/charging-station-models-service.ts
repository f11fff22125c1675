import type { Executor } from '../db/database.js';
import { isUniqueViolation } from '../db/failures.js';
import { ConflictError, NotFoundError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { profileNeedsTls, type SecurityProfile } from '../kernel/ocpp-vocabulary.js';
import type { ConnectorRecord } from './asset-management-tables.js';
import type { ChargingStationModel, CreateChargingStationModelInput } from './asset-management-schemas.js';
import {
  VENDOR_MODEL_UNIQUE,
  archiveChargingStationModel,
  findChargingStationModel,
  insertChargingStationModel,
  listChargingStationModels,
  type ChargingStationModelRow,
} from './charging-station-models-repository.js';
import { paginate, rowsToFetch, type Page, type PageOptions } from './paging.js';
import { CONFLICTING_SECURITY_PROFILE_STATE, isPlainWebSocketUrl } from './security-profiles.js';

export const CHARGING_STATION_MODEL_NOT_FOUND = 'CHARGING_STATION_MODEL_NOT_FOUND';
export const CHARGING_STATION_MODEL_ALREADY_EXISTS = 'CHARGING_STATION_MODEL_ALREADY_EXISTS';

const FRIENDLY_NAME_MAX = 200;

// vendor and model may be 200 characters each; the default display name must still fit the limit.
function defaultFriendlyName(vendor: string, model: string): string {
  const chars = [...`${vendor} ${model}`];
  return chars.length <= FRIENDLY_NAME_MAX ? chars.join('') : chars.slice(0, FRIENDLY_NAME_MAX).join('').trimEnd();
}

export function toChargingStationModel(row: ChargingStationModelRow): ChargingStationModel {
  const model: ChargingStationModel = {
    id: row.id,
    vendor: row.vendor,
    model: row.model,
    powerType: row.powerType,
    // jsonb reorders keys, so the published field order is rebuilt here.
    connectors: row.connectors.map((c) => ({
      id: c.id,
      ...(c.connectionType !== undefined ? { connectionType: c.connectionType } : {}),
      ...(c.format !== undefined ? { format: c.format } : {}),
      maxAmperage: c.maxAmperage,
      maxVoltage: c.maxVoltage,
      maxPowerWatts: c.maxPowerWatts,
    })),
    configurationKeys: row.ocppUrl !== null ? { ocppUrl: row.ocppUrl } : {},
    isArchived: row.isArchived,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    friendlyName: row.friendlyName,
  };
  if (row.imageUrl !== null) model.imageUrl = row.imageUrl;
  return model;
}

export async function createChargingStationModel(
  db: Executor,
  deps: { minSecurityProfile: SecurityProfile },
  input: CreateChargingStationModelInput,
): Promise<ChargingStationModel> {
  const ocppUrl = input.configurationKeys?.ocppUrl ?? null;
  if (profileNeedsTls(deps.minSecurityProfile) && isPlainWebSocketUrl(ocppUrl)) {
    throw new ConflictError(
      `configurationKeys.ocppUrl uses ws:// without TLS, but the network requires at least OCPP security profile ${deps.minSecurityProfile}, which needs a wss:// URL`,
      CONFLICTING_SECURITY_PROFILE_STATE,
    );
  }
  const connectors: ConnectorRecord[] = input.connectors.map((c) => ({
    id: c.id,
    maxAmperage: c.maxAmperage,
    maxVoltage: c.maxVoltage,
    maxPowerWatts: c.maxPowerWatts,
    ...(c.connectionType !== undefined ? { connectionType: c.connectionType } : {}),
    ...(c.format !== undefined ? { format: c.format } : {}),
  }));
  try {
    const row = await insertChargingStationModel(db, {
      id: newId('csm'),
      vendor: input.vendor,
      model: input.model,
      powerType: input.powerType,
      connectors,
      ocppUrl,
      friendlyName: input.friendlyName ?? defaultFriendlyName(input.vendor, input.model),
      imageUrl: input.imageUrl ?? null,
      isArchived: false,
    });
    return toChargingStationModel(row);
  } catch (error) {
    // The unique index decides, so two concurrent identical creates cannot both succeed.
    if (isUniqueViolation(error, VENDOR_MODEL_UNIQUE)) {
      throw new ConflictError(
        `A charging station model for vendor "${input.vendor}" and model "${input.model}" already exists (compared case-insensitively)`,
        CHARGING_STATION_MODEL_ALREADY_EXISTS,
      );
    }
    throw error;
  }
}

function modelNotFound(id: string): NotFoundError {
  return new NotFoundError(`No charging station model with id ${id}`, CHARGING_STATION_MODEL_NOT_FOUND);
}

export async function getChargingStationModel(db: Executor, id: string): Promise<ChargingStationModel> {
  const row = await findChargingStationModel(db, id);
  if (!row) throw modelNotFound(id);
  return toChargingStationModel(row);
}

export async function listModels(db: Executor, options: PageOptions & { includeArchived: boolean }): Promise<Page<ChargingStationModel>> {
  const rows = await listChargingStationModels(db, { ...options, limit: rowsToFetch(options) });
  return paginate(rows, options.limit, toChargingStationModel);
}

export async function archiveModel(db: Executor, id: string): Promise<ChargingStationModel> {
  const row = await archiveChargingStationModel(db, id);
  if (!row) throw modelNotFound(id);
  return toChargingStationModel(row);
}
