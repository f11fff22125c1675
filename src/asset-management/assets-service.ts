import type { Principal } from '../auth/principal.js';
import type { Executor } from '../db/database.js';
import { findPgError, isUniqueViolation } from '../db/failures.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { coversNetwork, type NetworkScope } from '../kernel/network-scope.js';
import { profileNeedsTls, type SecurityProfile } from '../kernel/ocpp-vocabulary.js';
import { DEFAULT_OCPP_VERSION, type Asset, type CreateAssetInput } from './asset-management-schemas.js';
import { ASSETS_PKEY, findAsset, insertAsset, listAssets, type AssetRow } from './assets-repository.js';
import { effectiveState } from './rotation.js';
import { findChargingStationModel, type ChargingStationModelRow } from './charging-station-models-repository.js';
import { paginate, rowsToFetch, type Page, type PageOptions } from './paging.js';
import { CONFLICTING_SECURITY_PROFILE_STATE, isPlainWebSocketUrl } from './security-profiles.js';
import type { StationLink, StationView } from './station-link.js';

export const ASSET_NOT_FOUND = 'ASSET_NOT_FOUND';
export const ASSET_ALREADY_EXISTS = 'ASSET_ALREADY_EXISTS';

type Actor = NetworkScope & Pick<Principal, 'clientId'>;

function rotationView(row: AssetRow): Asset['rotation'] {
  if (row.rotationId === null || row.rotationState === null || row.rotationRequestedAt === null) return null;
  const deadlinePassed = row.rotationDeadline !== null && row.rotationDeadline.getTime() < Date.now();
  return {
    id: row.rotationId,
    state: effectiveState(row.rotationState, deadlinePassed),
    requestedAt: row.rotationRequestedAt.toISOString(),
    resolvedAt: row.rotationResolvedAt ? row.rotationResolvedAt.toISOString() : null,
    staleLoginAt: row.staleLoginAt ? row.staleLoginAt.toISOString() : null,
  };
}

export function toAsset(row: AssetRow, station: StationView | null = null): Asset {
  // Built field by field: the row carries the password hashes, which must never be answered.
  return {
    id: row.id,
    network: row.network,
    name: row.name,
    chargingStationModelId: row.chargingStationModelId,
    ocppVersion: row.ocppVersion,
    securityProfile: row.securityProfile,
    passwordChangedAt: row.passwordChangedAt ? row.passwordChangedAt.toISOString() : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    station,
    rotation: rotationView(row),
  };
}

// The same answer whether the asset is missing or belongs to another network: no hint it exists.
export function assetNotFound(id: string): NotFoundError {
  return new NotFoundError(`No asset with id ${id}`, ASSET_NOT_FOUND);
}

function invalidField(field: string, message: string): BadRequestError {
  return new BadRequestError(message, [{ code: 'custom', message, path: [field] }]);
}

export async function createAsset(
  db: Executor,
  deps: { minSecurityProfile: SecurityProfile },
  actor: Actor,
  input: CreateAssetInput,
): Promise<Asset> {
  if (!coversNetwork(actor, input.network)) {
    // A 403, not a 404: the caller named the network, so refusing it reveals nothing.
    throw new ForbiddenError('Access token is scoped to another network and may only create assets in its own network');
  }
  const ocppVersion = input.ocppVersion ?? DEFAULT_OCPP_VERSION;
  const securityProfile = input.securityProfile ?? deps.minSecurityProfile;
  // Invalid parameters (400) are reported before conflicts with the network's state (409).
  let model: ChargingStationModelRow | undefined;
  if (input.chargingStationModelId !== undefined) {
    model = await findChargingStationModel(db, input.chargingStationModelId);
    if (!model) throw invalidField('chargingStationModelId', `no charging station model with id ${input.chargingStationModelId}`);
    if (model.isArchived) throw invalidField('chargingStationModelId', `charging station model ${model.id} is archived`);
  }
  if (securityProfile < deps.minSecurityProfile) {
    throw new ConflictError(
      `securityProfile ${securityProfile} is below the network's minimum OCPP security profile ${deps.minSecurityProfile}`,
      CONFLICTING_SECURITY_PROFILE_STATE,
    );
  }
  if (model && profileNeedsTls(securityProfile) && isPlainWebSocketUrl(model.ocppUrl)) {
    throw new ConflictError(
      `OCPP security profile ${securityProfile} needs TLS, but charging station model ${model.id} connects over ws://; use security profile 1 or a model with a wss:// URL`,
      CONFLICTING_SECURITY_PROFILE_STATE,
    );
  }
  const id = input.id ?? newId('ast');
  try {
    const row = await insertAsset(db, {
      id,
      network: input.network,
      name: input.name ?? null,
      chargingStationModelId: input.chargingStationModelId ?? null,
      ocppVersion,
      securityProfile,
    });
    return toAsset(row);
  } catch (error) {
    if (isUniqueViolation(error, ASSETS_PKEY)) {
      throw new ConflictError(`An asset with id ${id} already exists`, ASSET_ALREADY_EXISTS);
    }
    // Models are never deleted, so this is only a belt to the existence check above.
    if (findPgError(error)?.code === '23503') {
      throw invalidField('chargingStationModelId', `no charging station model with id ${input.chargingStationModelId}`);
    }
    throw error;
  }
}

export async function getAsset(db: Executor, stations: StationLink, actor: Actor, id: string): Promise<Asset> {
  const row = await findAsset(db, actor, id);
  if (!row) throw assetNotFound(id);
  return toAsset(row, (await stations.views([row.id])).get(row.id) ?? null);
}

export async function listAssetsPage(
  db: Executor,
  stations: StationLink,
  actor: Actor,
  options: PageOptions & { network?: string | undefined },
): Promise<Page<Asset>> {
  // A scoped token asking for another network gets an empty page, not an error: no hint it exists.
  if (options.network !== undefined && !coversNetwork(actor, options.network)) {
    return { items: [], hasMore: false };
  }
  // The caller's network, narrowed to the one asked for.
  const rows = await listAssets(db, { network: actor.network ?? options.network ?? null }, {
    limit: rowsToFetch(options),
    startingAfter: options.startingAfter,
  });
  const page = paginate(rows, options.limit, (row) => row);
  const views = await stations.views(page.items.map((row) => row.id));
  return { items: page.items.map((row) => toAsset(row, views.get(row.id) ?? null)), hasMore: page.hasMore };
}
