import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireAdmin, requireScope } from '../auth/auth-plugin.js';
import { describeErrorShapes } from '../http/errors/error-shapes.js';
import { serveErrorFamily } from '../http/errors/error-families.js';
import { API_ROUTES_NEED } from '../http/plugin-order.js';
import type { PeriodicSweep } from '../kernel/periodic-sweep.js';
import { startAbandonedRotationsSweep } from './abandoned-rotations.js';
import { ASSET_MANAGEMENT_ERRORS, ASSET_MANAGEMENT_ERROR_FAMILY, assetManagementResponses } from './asset-management-error-family.js';
import {
  assetOutput,
  changePasswordBody,
  changePasswordOutput,
  changePasswordUnconfirmedOutput,
  chargingStationModelOutput,
  createAssetBody,
  createChargingStationModelBody,
  emptyBody,
  envelope,
  idParams,
  listAssetsQuery,
  listChargingStationModelsQuery,
  notModified,
  page,
} from './asset-management-schemas.js';
import { ASSET_ALREADY_EXISTS, ASSET_NOT_FOUND, createAsset, getAsset, listAssetsPage } from './assets-service.js';
import { PASSWORD_CHANGE_IN_PROGRESS, STATION_OFFLINE, STATION_REJECTED, changeAssetPassword } from './password-rotation-service.js';
import { NOTHING_TO_ROLL_BACK, rollBackAssetPassword } from './password-rollback-service.js';
import type { Argon2Params } from './password-hashing.js';
import {
  CHARGING_STATION_MODEL_ALREADY_EXISTS,
  CHARGING_STATION_MODEL_NOT_FOUND,
  archiveModel,
  createChargingStationModel,
  getChargingStationModel,
  listModels,
} from './charging-station-models-service.js';
import { CONFLICTING_SECURITY_PROFILE_STATE } from './security-profiles.js';
import type { StationLink } from './station-link.js';

const modelNotFound = { codes: [CHARGING_STATION_MODEL_NOT_FOUND], means: 'No charging station model with this id' } as const;
const assetNotFound = { codes: [ASSET_NOT_FOUND], means: 'No asset with this id visible to this access token' } as const;

// Hooks run in order after authentication, so the order of checks is 401 → 403 → 400 (validation).
const modelWriters = [requireScope('write:chargingstationmodel'), requireAdmin({ allNetworks: true })];
const modelReaders = [requireScope('read:chargingstationmodel', 'write:chargingstationmodel')];
const assetWriters = [requireScope('write:asset')];
const assetReaders = [requireScope('read:asset', 'write:asset')];

export interface AssetManagementRoutesOptions {
  // The argon2id cost of new supplied-password hashes; tests lower it, production keeps the default.
  passwordHashParams?: Argon2Params | undefined;
  // The station side (station-link.ts): the stations area's connections.
  stations: StationLink;
  // How often changes whose waiting replica died are looked for (abandoned-rotations.ts).
  abandonedSweepMs?: number | undefined;
}

// The asset-management family, registered with the prefix /asset-management/v1: its errors, the
// root hooks' 401 and 429 included, take the shapes asset-management-error-family.ts lists.
export const ASSET_MANAGEMENT_PREFIX = '/asset-management/v1';

// The API reference's group of these operations.
export const ASSET_MANAGEMENT_TAG = {
  name: 'asset-management',
  description: `Charging station models and assets: \`${ASSET_MANAGEMENT_PREFIX}\`. ${describeErrorShapes(ASSET_MANAGEMENT_ERRORS)}`,
};
const tags = [ASSET_MANAGEMENT_TAG.name];

async function assetManagementRoutes(app: FastifyInstance, options: AssetManagementRoutesOptions): Promise<void> {
  serveErrorFamily(app, ASSET_MANAGEMENT_ERROR_FAMILY);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const db = app.database.db;
  const { stations } = options;
  const { ocppMinSecurityProfile } = app.config;
  // Where a new resource is read: the Location of a 201.
  const location = (collection: string, id: string) => `${app.prefix}/${collection}/${encodeURIComponent(id)}`;

  let sweep: PeriodicSweep | undefined;
  app.addHook('onReady', async () => {
    sweep = startAbandonedRotationsSweep({ db, log: app.log.child({ component: 'password-rotation' }), intervalMs: options.abandonedSweepMs });
  });
  // While the database is still open.
  app.addHook('preClose', async () => {
    await sweep?.stop();
  });

  r.post(
    '/charging-station-models',
    {
      onRequest: modelWriters,
      config: { idempotencyKey: 'honoured' },
      schema: {
        tags,
        operationId: 'createChargingStationModel',
        summary: 'Create a charging station model (admin)',
        description:
          'Adds a model to the catalogue every network shares. Vendor and model are unique together, compared case-insensitively. A `ws://` OCPP URL needs a minimum security profile of 1.',
        body: createChargingStationModelBody,
        response: assetManagementResponses(
          { 201: envelope(chargingStationModelOutput) },
          {
            409: {
              codes: [CHARGING_STATION_MODEL_ALREADY_EXISTS, CONFLICTING_SECURITY_PROFILE_STATE],
              means: 'A model of this vendor and model exists already, or its OCPP URL needs less security than the network requires',
            },
            idempotencyKey: true,
          },
        ),
      },
    },
    async (request, reply) => {
      const model = await createChargingStationModel(db, { minSecurityProfile: ocppMinSecurityProfile }, request.body);
      return reply.code(201).header('location', location('charging-station-models', model.id)).send({ data: model });
    },
  );

  r.get(
    '/charging-station-models',
    {
      onRequest: modelReaders,
      schema: {
        tags,
        operationId: 'listChargingStationModels',
        summary: 'List charging station models, oldest first',
        description: 'One page of the catalogue; `hasMore` says whether another follows (ask for it with `startingAfter` = the last id). Archived models only with `includeArchived=true`.',
        querystring: listChargingStationModelsQuery,
        response: assetManagementResponses({ 200: page(chargingStationModelOutput) }),
      },
    },
    async (request) => {
      return { data: await listModels(db, request.query) };
    },
  );

  r.get(
    '/charging-station-models/:id',
    {
      onRequest: modelReaders,
      config: { etag: true },
      schema: {
        tags,
        operationId: 'getChargingStationModel',
        summary: 'Get one charging station model',
        description: 'Returns one model by its id, archived or not. The answer carries an ETag; a request whose If-None-Match holds it gets a 304 without a body.',
        params: idParams,
        response: assetManagementResponses({ 200: envelope(chargingStationModelOutput), 304: notModified }, { 404: modelNotFound }),
      },
    },
    async (request) => ({ data: await getChargingStationModel(db, request.params.id) }),
  );

  r.post(
    '/charging-station-models/:id/archive',
    {
      onRequest: modelWriters,
      schema: {
        tags,
        operationId: 'archiveChargingStationModel',
        summary: 'Archive a charging station model (admin; repeating it is harmless)',
        description: 'Hides the model from the list (unless `includeArchived=true`) and from new assets; assets that use it keep it. The body is optional.',
        params: idParams,
        body: emptyBody,
        response: assetManagementResponses({ 200: envelope(chargingStationModelOutput) }, { 404: modelNotFound }),
      },
    },
    async (request) => ({ data: await archiveModel(db, request.params.id) }),
  );

  r.post(
    '/assets',
    {
      onRequest: assetWriters,
      config: { idempotencyKey: 'honoured' },
      schema: {
        tags,
        operationId: 'createAsset',
        summary: 'Create an asset',
        description:
          'Registers a charging station under a network. Its id is the OCPP charge point identity (generated when omitted). It has no password until the first change-password. A network-scoped token may create assets of its own network only.',
        body: createAssetBody,
        response: assetManagementResponses(
          { 201: envelope(assetOutput) },
          {
            409: {
              codes: [ASSET_ALREADY_EXISTS, CONFLICTING_SECURITY_PROFILE_STATE],
              means: 'An asset with this id exists already, or the security profile is below the network minimum or does not fit the model',
            },
            idempotencyKey: true,
          },
        ),
      },
    },
    async (request, reply) => {
      const asset = await createAsset(db, { minSecurityProfile: ocppMinSecurityProfile }, request.principal, request.body);
      return reply.code(201).header('location', location('assets', asset.id)).send({ data: asset });
    },
  );

  r.get(
    '/assets',
    {
      onRequest: assetReaders,
      schema: {
        tags,
        operationId: 'listAssets',
        summary: 'List assets, ordered by id (a network-scoped token sees only its network)',
        description: 'One page of assets; `hasMore` says whether another follows (ask for it with `startingAfter` = the last id).',
        querystring: listAssetsQuery,
        response: assetManagementResponses({ 200: page(assetOutput) }),
      },
    },
    async (request) => {
      return { data: await listAssetsPage(db, stations, request.principal, request.query) };
    },
  );

  r.get(
    '/assets/:id',
    {
      onRequest: assetReaders,
      config: { etag: true },
      schema: {
        tags,
        operationId: 'getAsset',
        summary: 'Get one asset',
        description:
          "Returns one asset with its station connection and latest password change. Another network's asset is a 404 to a network-scoped token. The answer carries an ETag (it changes with the station's state too); a request whose If-None-Match holds it gets a 304 without a body.",
        params: idParams,
        response: assetManagementResponses({ 200: envelope(assetOutput), 304: notModified }, { 404: assetNotFound }),
      },
    },
    async (request) => ({ data: await getAsset(db, stations, request.principal, request.params.id) }),
  );

  r.post(
    '/assets/change-password',
    {
      onRequest: assetWriters,
      // Its answer may carry a generated password, which must never be stored to be replayed.
      config: { idempotencyKey: 'refused' },
      schema: {
        tags,
        operationId: 'changeAssetPassword',
        summary: 'Change the password of an asset (omit password to have one generated, shown once), or roll back the latest change',
        description:
          'A station that has logged in before gets the password over OCPP, and it is stored only when the station accepts it (200); an unknown outcome is a 202 with both passwords accepted until the station logs in with one. With `{ id, rollback: true }` the password the latest change replaced becomes the only one again (200, nothing is sent to the station): the way back in for a station that answered Accepted and kept its old password. A request with an Idempotency-Key is a 400: the answer may carry a generated password, which is never stored, so it could not be replayed.',
        body: changePasswordBody,
        response: assetManagementResponses(
          { 200: envelope(changePasswordOutput), 202: envelope(changePasswordUnconfirmedOutput) },
          {
            404: assetNotFound,
            409: {
              codes: [STATION_REJECTED, STATION_OFFLINE, PASSWORD_CHANGE_IN_PROGRESS, CONFLICTING_SECURITY_PROFILE_STATE, NOTHING_TO_ROLL_BACK],
              means:
                'STATION_REJECTED: the station refused, nothing changed; STATION_OFFLINE: logged in before, not connected now (force: true stores anyway); PASSWORD_CHANGE_IN_PROGRESS (a rollback too waits for it); CONFLICTING_SECURITY_PROFILE_STATE: profile 3 has no password; NOTHING_TO_ROLL_BACK: the latest change replaced no password, or was rolled back already',
              examples: [
                { code: STATION_REJECTED, message: 'The station of asset CP-1 refused the new password: the station answered Rejected; nothing changed' },
                { code: STATION_OFFLINE, message: 'The station of asset CP-1 is not connected, so it cannot take the new password; nothing changed' },
                { code: PASSWORD_CHANGE_IN_PROGRESS, message: 'A password change of asset CP-1 is waiting for its station' },
                {
                  code: NOTHING_TO_ROLL_BACK,
                  message: 'Asset CP-1 has no password change to roll back: its latest change did not replace a password, or was rolled back already',
                },
              ],
            },
          },
        ),
      },
    },
    async (request, reply) => {
      const { body } = request;
      const deps = { passwordHashParams: options.passwordHashParams, stations, callTimeoutMs: app.config.ocpp.callTimeoutMs };
      const result =
        body.rollback === true
          ? ({ status: 200, data: await rollBackAssetPassword(db, request.principal, body.id) } as const)
          : await changeAssetPassword(db, deps, request.principal, body);
      // The answer may carry a generated secret: no cache may keep it.
      reply.header('cache-control', 'no-store');
      return result.status === 200 ? reply.code(200).send({ data: result.data }) : reply.code(202).send({ data: result.data });
    },
  );
}

// A password change reaches the station through the stations plugin, registered before.
export default fp(assetManagementRoutes, {
  name: 'asset-management-routes',
  encapsulate: true,
  dependencies: [...API_ROUTES_NEED, 'stations'],
  decorators: { fastify: ['database', 'config'] },
});
