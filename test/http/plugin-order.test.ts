// Plugin order is declared, not remembered: each plugin names the plugins it needs registered
// before it (fastify-plugin's `dependencies`), and Fastify refuses the start when one is missing
// or comes later. Here buildApp's own plugins are registered in its order, one of them left out.
import fastifyCompress from '@fastify/compress';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import assetManagementRoutes, { ASSET_MANAGEMENT_PREFIX } from '../../src/asset-management/asset-management-routes.js';
import authPlugin from '../../src/auth/auth-plugin.js';
import authentication from '../../src/auth/authentication-plugin.js';
import { loadConfig } from '../../src/kernel/config.js';
import type { Database } from '../../src/db/database.js';
import paymentsRoutes, { PAYMENTS_PREFIX } from '../../src/payments/payments-routes.js';
import databasePlugin from '../../src/http/database-plugin.js';
import errorHandler from '../../src/http/error-handler.js';
import etag from '../../src/http/etag.js';
import idempotency from '../../src/http/idempotency/idempotency-plugin.js';
import observability from '../../src/http/observability.js';
import openapi from '../../src/http/openapi.js';
import rateLimit from '../../src/http/rate-limit.js';
import stationsPlugin from '../../src/stations/stations-plugin.js';
import { createTestApp } from '../helpers/test-app.js';
import { createTestDatabase } from '../helpers/test-database.js';

const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent' });
let database: Database;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.close();
});

// buildApp's plugins in its order, each under the name it declares. The stations plugin comes
// after the payments routes here (both orders are valid): a start refused before it never opens
// the stations' own connections.
function pieces(): [name: string, register: (app: FastifyInstance) => void][] {
  return [
    ['error-handler', (app) => void app.register(errorHandler)],
    ['@fastify/compress', (app) => void app.register(fastifyCompress, { globalDecompression: false })],
    ['database', (app) => void app.register(databasePlugin, { database })],
    ['observability', (app) => void app.register(observability, { database })],
    ['auth', (app) => void app.register(authPlugin, { auth: config.auth, database })],
    ['rate-limit', (app) => void app.register(rateLimit, config.rateLimit)],
    ['authentication', (app) => void app.register(authentication)],
    ['idempotency', (app) => void app.register(idempotency, { db: database.db, clock: () => new Date(), leaseMs: 60_000 })],
    ['etag', (app) => void app.register(etag)],
    ['openapi', (app) => void app.register(openapi, { tokenUrl: '/oauth/token', tags: [] })],
    ['payments-routes', (app) => void app.register(paymentsRoutes, { prefix: PAYMENTS_PREFIX })],
    ['stations', (app) => void app.register(stationsPlugin, {})],
    [
      'asset-management-routes',
      // The station side is read when a route runs (none runs here): registered later, as in buildApp.
      (app) =>
        void app.register(assetManagementRoutes, {
          prefix: ASSET_MANAGEMENT_PREFIX,
          stations: {
            views: (ids) => app.stations.views(ids),
            isConnected: (id, deadline) => app.stations.isConnected(id, deadline),
            sendPasswordChange: (command) => app.stations.sendPasswordChange(command),
          },
        }),
    ],
  ];
}

// What ready() says when buildApp's plugins are registered without `left out`.
async function startWithout(leftOut: string): Promise<unknown> {
  const app = Fastify({ logger: false });
  app.decorate('database', database);
  app.decorate('config', config);
  for (const [name, register] of pieces()) if (name !== leftOut) register(app);
  try {
    await app.ready();
    return 'started';
  } catch (error) {
    return error;
  } finally {
    await app.close().catch(() => undefined);
  }
}

describe('plugin order', () => {
  it.each([
    ['error-handler', 'observability'],
    ['@fastify/compress', 'observability'],
    ['database', 'auth'],
    ['observability', 'openapi'],
    ['auth', 'rate-limit'],
    ['rate-limit', 'authentication'],
    ['authentication', 'openapi'],
    ['idempotency', 'payments-routes'],
    ['etag', 'payments-routes'],
    ['openapi', 'payments-routes'],
    ['stations', 'asset-management-routes'],
  ])('without %s, Fastify refuses %s at ready()', async (leftOut, refused) => {
    expect(await startWithout(leftOut)).toMatchObject({
      code: 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED',
      message: `The dependency '${leftOut}' of plugin '${refused}' is not registered`,
    });
  });

  it('refuses a dependency registered after the plugin that needs it: the rate limiter before auth', async () => {
    const app = Fastify({ logger: false });
    await app.register(errorHandler);
    await app.register(fastifyCompress, { globalDecompression: false });
    await app.register(databasePlugin, { database });
    void app.register(rateLimit, config.rateLimit);
    void app.register(authPlugin, { auth: config.auth, database });
    await expect(app.ready()).rejects.toMatchObject({
      code: 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED',
      message: "The dependency 'auth' of plugin 'rate-limit' is not registered",
    });
    await app.close().catch(() => undefined);
  });

  it('refuses an API family on an instance without the database and config buildApp decorates it with', async () => {
    const app = Fastify({ logger: false });
    for (const [name, register] of pieces()) if (name !== 'payments-routes' && name !== 'stations' && name !== 'asset-management-routes') register(app);
    // pieces() registers nothing that needs `database`; the family does.
    void app.register(paymentsRoutes, { prefix: PAYMENTS_PREFIX });
    await expect(app.ready()).rejects.toMatchObject({ code: 'FST_ERR_PLUGIN_NOT_PRESENT_IN_INSTANCE' });
    await app.close().catch(() => undefined);
  });

  it('names buildApp’s own plugins: the app registers every one of them', async () => {
    const t = await createTestApp({ database });
    try {
      expect(pieces().map(([name]) => name).filter((name) => !t.app.hasPlugin(name))).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
