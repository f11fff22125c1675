import { afterAll, beforeAll, expect } from 'vitest';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/main/app.js';
import type { Argon2Params } from '../../src/asset-management/password-hashing.js';
import { loadConfig, type AppConfig } from '../../src/kernel/config.js';
import type { Database } from '../../src/db/database.js';
import type { LoginLimits } from '../../src/stations/login-gate.js';
import type { ResolveHost } from '../../src/events/target-rules.js';
import { createTestDatabase } from './test-database.js';

export interface TokenOptions {
  scopes: string[];
  network?: string | null;
  admin?: boolean;
  clientId?: string;
}

export interface TestApp {
  app: FastifyInstance;
  config: AppConfig;
  database: Database;
  // "Bearer <jwt>" from the app's own embedded issuer
  bearer(options: TokenOptions): string;
  logLines(): string[];
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  captureLogs?: boolean;
  // Extra routes to register before app.ready().
  routes?: (app: FastifyInstance) => void | Promise<void>;
  // Let the caller keep and close the database (e.g. to close it under a running app).
  database?: Database;
  // Cheaper password hashes, so HTTP tests of password changes need not spend ~100 ms each.
  passwordHashParams?: Argon2Params;
  // The clock idempotency keys live by (default: the real one).
  clock?: () => Date;
  // The station login throttle's and queue's numbers (default: production's).
  stationLoginLimits?: Partial<LoginLimits>;
  // The waits between webhook attempts (default: production's).
  webhookRetryDelaysMs?: readonly number[];
  // How often the delivery worker polls unwoken (default: production's 500 ms).
  webhookPollIntervalMs?: number;
  // How webhook target host names resolve (default: the system's resolver).
  webhookResolveHost?: ResolveHost;
  // How long a subscription's request waits for its target's lookup (default: production's 5 s).
  webhookLookupTimeoutMs?: number;
  // How often password changes whose waiting replica died are looked for (default: production's).
  abandonedRotationsSweepMs?: number;
}

export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const lines: string[] = [];
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: options.captureLogs ? 'info' : 'silent',
    RATE_LIMIT_MAX: '0',
    ...options.env,
  });
  const database =
    options.database ??
    (await createTestDatabase({
      statementTimeoutMs: config.database.statementTimeoutMs,
      acquireTimeoutMs: config.database.acquireTimeoutMs,
      ...(options.env?.DATABASE_POOL_MAX ? { poolMax: config.database.poolMax } : {}),
    }));
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter((l) => l.length > 0));
      cb();
    },
  });
  const app = await buildApp(config, { database, logStream, passwordHashParams: options.passwordHashParams, clock: options.clock, stationLoginLimits: options.stationLoginLimits, webhookRetryDelaysMs: options.webhookRetryDelaysMs, webhookPollIntervalMs: options.webhookPollIntervalMs, webhookResolveHost: options.webhookResolveHost, webhookLookupTimeoutMs: options.webhookLookupTimeoutMs, abandonedRotationsSweepMs: options.abandonedRotationsSweepMs });
  await options.routes?.(app);
  await app.ready();
  return {
    app,
    config,
    database,
    bearer({ scopes, network, admin, clientId }) {
      const tokens = app.auth.tokens;
      if (!tokens) throw new Error('bearer() needs the embedded issuer');
      const { access_token } = tokens.issue({ clientId: clientId ?? 'cli_test', scopes, network: network ?? null, isAdmin: admin ?? false });
      return `Bearer ${access_token}`;
    },
    logLines: () => lines,
    async close() {
      await app.close();
      if (!options.database) await database.close();
    },
  };
}

// The app of one test file: built before its first test, closed after its last. The returned
// object stands for it from beforeAll on, so a file reads `const t = useTestApp();`.
export function useTestApp(options: TestAppOptions = {}): TestApp {
  let current: TestApp | undefined;
  beforeAll(async () => {
    current = await createTestApp(options);
  });
  afterAll(async () => {
    await current?.close();
  });
  return new Proxy({} as TestApp, {
    get(_target, property) {
      if (!current) throw new Error('the test app exists from beforeAll on');
      return Reflect.get(current, property) as unknown;
    },
  });
}

// An access token of the embedded issuer for a client, asked for through the token endpoint as a
// client would (client_secret_post).
export async function embeddedIssuerToken(app: FastifyInstance, client: { clientId: string; clientSecret: string }): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret }).toString(),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { access_token: string }).access_token;
}
