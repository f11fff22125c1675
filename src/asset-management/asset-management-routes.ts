import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireAdmin, requireScope } from '../auth/auth-plugin.js';
import { renderAssetManagementError } from '../plugins/error-handler.js';
import {
  assetOutput,
  changePasswordBody,
  changePasswordConflict,
  changePasswordOutput,
  changePasswordUnconfirmedOutput,
  chargingStationModelOutput,
  createAssetBody,
  createChargingStationModelBody,
  emptyBody,
  envelope,
  errorBody,
  idParams,
  idempotencyKeyReused,
  listAssetsQuery,
  listChargingStationModelsQuery,
  messageBody,
  notModified,
  page,
} from './asset-management-schemas.js';
import { createAsset, getAsset, listAssetsPage } from './assets-service.js';
import { changeAssetPassword } from './password-rotation-service.js';
import type { Argon2Params } from './passwords.js';
import { archiveModel, createChargingStationModel, getChargingStationModel, listModels } from './charging-station-models-service.js';

const tags = ['asset-management'];

// 401 and 403 are `{ message }`; everything else in this family is `{ type, code, message }`.
const errors = { 400: errorBody, 401: messageBody, 403: messageBody, 500: errorBody } as const;

// Hooks run in order after authentication, so the order of checks is 401 → 403 → 400 (validation).
const modelWriters = [requireScope('write:chargingstationmodel'), requireAdmin({ allNetworks: true })];
const modelReaders = [requireScope('read:chargingstationmodel', 'write:chargingstationmodel')];
const assetWriters = [requireScope('write:asset')];
const assetReaders = [requireScope('read:asset', 'write:asset')];

export interface AssetManagementRoutesOptions {
  // The argon2id cost of new supplied-password hashes; tests lower it, production keeps the default.
  passwordHashParams?: Argon2Params;
}

// The asset-management family, registered with the prefix /asset-management/v1: its errors, the
// root hooks' 401 and 429 included, take the `{ type, code, message }` shapes.
export const ASSET_MANAGEMENT_PREFIX = '/asset-management/v1';

export async function assetManagementRoutes(app: FastifyInstance, options: AssetManagementRoutesOptions = {}): Promise<void> {
  app.setErrorHandler(renderAssetManagementError);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const db = app.services.database.db;
  const { ocppMinSecurityProfile } = app.services.config;
  // Where a new resource is read: the Location of a 201.
  const location = (collection: string, id: string) => `${app.prefix}/${collection}/${encodeURIComponent(id)}`;
  // A 409 of a create may also be its Idempotency-Key in use (CONFLICT / IDEMPOTENCY_KEY_IN_USE).
  const createErrors = { ...errors, 409: errorBody, 422: idempotencyKeyReused };

  r.post(
    '/charging-station-models',
    {
      onRequest: modelWriters,
      config: { idempotencyKey: 'honoured' },
      schema: {
        tags,
        summary: 'Create a charging station model (admin)',
        body: createChargingStationModelBody,
        response: { 201: envelope(chargingStationModelOutput), ...createErrors },
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
        summary: 'List charging station models, oldest first',
        querystring: listChargingStationModelsQuery,
        response: { 200: page(chargingStationModelOutput), ...errors },
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
        summary: 'Get one charging station model',
        description: 'The answer carries an ETag; a request whose If-None-Match holds it gets a 304 without a body.',
        params: idParams,
        response: { 200: envelope(chargingStationModelOutput), 304: notModified, ...errors, 404: errorBody },
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
        summary: 'Archive a charging station model (admin; repeating it is harmless)',
        params: idParams,
        body: emptyBody,
        response: { 200: envelope(chargingStationModelOutput), ...errors, 404: errorBody },
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
        summary: 'Create an asset',
        body: createAssetBody,
        response: { 201: envelope(assetOutput), ...createErrors },
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
        summary: 'List assets, ordered by id (a network-scoped token sees only its network)',
        querystring: listAssetsQuery,
        response: { 200: page(assetOutput), ...errors },
      },
    },
    async (request) => {
      return { data: await listAssetsPage(db, request.principal, request.query) };
    },
  );

  r.get(
    '/assets/:id',
    {
      onRequest: assetReaders,
      config: { etag: true },
      schema: {
        tags,
        summary: 'Get one asset',
        description: 'The answer carries an ETag (it changes with the station\'s state too); a request whose If-None-Match holds it gets a 304 without a body.',
        params: idParams,
        response: { 200: envelope(assetOutput), 304: notModified, ...errors, 404: errorBody },
      },
    },
    async (request) => ({ data: await getAsset(db, request.principal, request.params.id) }),
  );

  r.post(
    '/assets/change-password',
    {
      onRequest: assetWriters,
      // Its answer may carry a generated password, which must never be stored to be replayed.
      config: { idempotencyKey: 'refused' },
      schema: {
        tags,
        summary: 'Change the password of an asset; omit password to have one generated (shown once)',
        description:
          'A station that has logged in before gets the password over OCPP, and it is stored only when the station accepts it (200); an unknown outcome is a 202 with both passwords accepted until the station logs in with one. A request with an Idempotency-Key is a 400: the answer may carry a generated password, which is never stored, so it could not be replayed.',
        body: changePasswordBody,
        response: {
          200: envelope(changePasswordOutput),
          202: envelope(changePasswordUnconfirmedOutput),
          ...errors,
          404: errorBody,
          409: changePasswordConflict,
        },
      },
    },
    async (request, reply) => {
      // Read when the request comes: the stations plugin is registered after these routes.
      const deps = { passwordHashParams: options.passwordHashParams, stations: app.stations, callTimeoutMs: app.services.config.ocpp.callTimeoutMs };
      const result = await changeAssetPassword(db, deps, request.principal, request.body);
      // The answer may carry a generated secret: no cache may keep it.
      reply.header('cache-control', 'no-store');
      return result.status === 200 ? reply.code(200).send({ data: result.data }) : reply.code(202).send({ data: result.data });
    },
  );
}
