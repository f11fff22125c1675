import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';
import fastifyCompress from '@fastify/compress';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { FastifySchemaCompiler } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { AppConfig } from '../kernel/config.js';
import { httpTimeLimits } from '../http/time-limits.js';
import { openDatabase, type Database } from '../db/database.js';
import { RequestValidationError } from '../kernel/errors.js';
import authPlugin from '../auth/auth-plugin.js';
import authentication from '../auth/authentication-plugin.js';
import oauthRoutes, { OAUTH_TAG, TOKEN_PATH, tokenEndpointOf } from '../auth/oauth-routes.js';
import errorHandler from '../http/error-handler.js';
import { clientErrorHandler, frameworkErrors } from '../http/errors/early-answers.js';
import databasePlugin from '../http/database-plugin.js';
import observability from '../http/observability.js';
import rateLimit from '../http/rate-limit.js';
import openapi from '../http/openapi.js';
import idempotency from '../http/idempotency/idempotency-plugin.js';
import etag from '../http/etag.js';
import { limitJsonDepth } from '../http/json-body.js';
import { inFlightLeaseMs } from '../http/idempotency/idempotency-rules.js';
import paymentsRoutes, { PAYMENTS_PREFIX, PAYMENTS_TAG } from '../payments/payments-routes.js';
import assetManagementRoutes, { ASSET_MANAGEMENT_PREFIX, ASSET_MANAGEMENT_TAG } from '../asset-management/asset-management-routes.js';
import type { Argon2Params } from '../asset-management/password-hashing.js';
import stationsPlugin from '../stations/stations-plugin.js';
import webhooksPlugin from '../events/webhooks-plugin.js';
import webhooksRoutes, { WEBHOOKS_PREFIX, WEBHOOKS_TAG } from '../events/webhooks-routes.js';
import type { ResolveHost } from '../events/target-rules.js';
import type { LoginLimits } from '../stations/login-gate.js';

export interface BuildOptions {
  // Tests hand in a fresh database; production opens the one the config names.
  database?: Database;
  logStream?: Writable;
  // Cheaper password hashes for tests; production keeps DEFAULT_ARGON2_PARAMS.
  passwordHashParams?: Argon2Params;
  // The clock idempotency keys are claimed and expire by, and the station login throttle refills
  // by; tests move it past a key's lifetime, or hold it still while they count refusals.
  clock?: () => Date;
  // Other numbers for the station login throttle and queue; production keeps LOGIN_LIMITS.
  stationLoginLimits?: Partial<LoginLimits>;
  // The waits between webhook attempts (default: events/delivery-schedule.ts's); tests shorten them.
  webhookRetryDelaysMs?: readonly number[];
  // How often the delivery worker looks for work unwoken (default 500 ms); a test lengthens it so
  // that only the worker's own wakes can deliver.
  webhookPollIntervalMs?: number;
  // How webhook target host names resolve (default: the system's resolver); tests pass their own.
  webhookResolveHost?: ResolveHost;
  // How long a subscription's request waits for its target's lookup (default 5 s); tests shorten it.
  webhookLookupTimeoutMs?: number;
  // How often a replica looks for password changes whose waiting replica died (default 5 s); tests
  // shorten it.
  abandonedRotationsSweepMs?: number;
}

// What the app was built with, for the plugins that read it at start-up or per request: the
// database it opened or was handed, and its configuration.
declare module 'fastify' {
  interface FastifyInstance {
    database: Database;
    config: AppConfig;
  }
}

export const BODY_LIMIT = 64 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

// Hands Fastify the ZodError itself, so issue paths keep numeric indices (["sessionIds", 3]).
const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    return result.success ? { value: result.data } : { error: new RequestValidationError(httpPart ?? 'body', result.error) };
  };

export async function buildApp(config: AppConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  const database =
    options.database ??
    (await openDatabase(config.database));

  const timeLimits = httpTimeLimits(config.requestTimeoutMs);
  const app = Fastify({
    logger: {
      level: config.logLevel,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          '*.password',
          '*.client_secret',
          '*.clientSecret',
          'password',
          'clientSecret',
        ],
        censor: '[redacted]',
      },
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    // One line per request is written by the observability plugin's onResponse hook.
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    // Long enough for any id the API accepts (128 characters), so over-long ids reach validation
    // and get the family's 400 instead of an unmatched-route 404.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 512 },
    // The limit bounds the arrival of headers and body only (httpTimeLimits), so no socket idle
    // timeout (connectionTimeout). Fastify assigns its own values after Node's constructor, which
    // checks headersTimeout ≤ requestTimeout: both carry them.
    requestTimeout: timeLimits.requestTimeout,
    keepAliveTimeout: timeLimits.keepAliveTimeout,
    http: timeLimits,
    clientErrorHandler,
    frameworkErrors,
    // The error plugin answers requests that arrive while closing, in the family's shape.
    return503OnClosing: false,
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(zodValidatorCompiler);
  // Response schemas document the API; responses are written with JSON.stringify, because running
  // Zod over every outgoing row costs half the throughput of the hot list endpoint.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  // Before any plugin or route, so every JSON body, every family's, is parsed under the limit.
  limitJsonDepth(app);
  app.decorate('database', database);
  app.decorate('config', config);

  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });
  app.addHook('onClose', async () => {
    if (!options.database) await database.close();
  });

  // In dependency order: each plugin names what must be registered before it (fastify-plugin's
  // `dependencies`), and Fastify refuses one that comes too early; src/http/plugin-order.ts says
  // what a plugin with routes comes after.
  await app.register(errorHandler);
  // Only for clients that ask; bodies under 1 KiB are sent as they are, since a compressed one
  // would save next to nothing. Request bodies are never inflated: a compressed body stays a 400
  // under the 64 KiB limit, and Content-Encoding cannot be used to send a small bomb.
  await app.register(fastifyCompress, { encodings: ['br', 'gzip'], threshold: 1024, globalDecompression: false });
  await app.register(databasePlugin, { database });
  await app.register(observability, { database });
  await app.register(authPlugin, { auth: config.auth, database });
  await app.register(rateLimit, config.rateLimit);
  await app.register(authentication);
  await app.register(idempotency, { db: database.db, clock: options.clock ?? (() => new Date()), leaseMs: inFlightLeaseMs(config.database) });
  await app.register(etag);
  // The embedded issuer's token endpoint is this server's own, so the page names it relatively;
  // an external provider's is {AUTH_ISSUER}/oauth/token (docs/api.md, Authentication).
  await app.register(openapi, {
    tokenUrl: config.auth.mode === 'embedded' ? TOKEN_PATH : tokenEndpointOf(config.auth.issuer),
    tags: [PAYMENTS_TAG, ASSET_MANAGEMENT_TAG, WEBHOOKS_TAG, OAUTH_TAG],
  });
  if (app.auth.tokens) await app.register(oauthRoutes, { db: database.db, auth: config.auth, tokens: app.auth.tokens });
  await app.register(stationsPlugin, { loginLimits: options.stationLoginLimits, clock: options.clock });
  await app.register(webhooksPlugin, { retryDelaysMs: options.webhookRetryDelaysMs, pollIntervalMs: options.webhookPollIntervalMs, resolveHost: options.webhookResolveHost });

  await app.register(paymentsRoutes, { prefix: PAYMENTS_PREFIX });
  await app.register(assetManagementRoutes, { prefix: ASSET_MANAGEMENT_PREFIX, passwordHashParams: options.passwordHashParams, stations: app.stations, abandonedSweepMs: options.abandonedRotationsSweepMs });
  await app.register(webhooksRoutes, { prefix: WEBHOOKS_PREFIX, lookups: app.webhookLookups, lookupTimeoutMs: options.webhookLookupTimeoutMs });

  return app;
}
