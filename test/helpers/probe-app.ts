import { createPrivateKey } from 'node:crypto';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { buildApp } from '../../src/app.js';
import { requireAdmin, requireScope } from '../../src/auth/auth-plugin.js';
import { listVerificationKeys } from '../../src/auth/signing-keys-repository.js';
import { loadConfig, type AppConfig } from '../../src/config.js';
import type { Database } from '../../src/db/database.js';
import type { TokenOptions } from './test-app.js';
import { createTestDatabase } from './test-database.js';

// Routes that exist only in foundation tests: they exercise the auth pipeline (token → scope/role)
// in both error families without depending on the real payments / asset-management routes.
export const PAYMENTS_PROBE = '/payments/v1/_probe';
export const ASSETS_PROBE = '/asset-management/v1/_probe';

export interface ProbeApp {
  app: FastifyInstance;
  config: AppConfig;
  database: Database;
  // "Bearer <jwt>" from the app's own embedded issuer
  bearer(options: TokenOptions): string;
  logLines(): string[];
  // The embedded issuer's active signing key, to forge tokens with chosen claims.
  signingKey(): Promise<{ kid: string; alg: 'ES256' | 'RS256'; privatePem: string }>;
  close(): Promise<void>;
}

export interface ProbeAppOptions {
  env?: Record<string, string>;
  captureLogs?: boolean;
  // Extra routes to register before app.ready().
  routes?: (app: FastifyInstance) => void | Promise<void>;
  // Let the caller keep and close the database (e.g. to close it under a running app).
  database?: Database;
}

function principalOf(request: FastifyRequest) {
  return { principal: { ...request.principal, scopes: [...request.principal.scopes].sort() } };
}

export async function createProbeApp(options: ProbeAppOptions = {}): Promise<ProbeApp> {
  const lines: string[] = [];
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: options.captureLogs ? 'info' : 'silent',
    RATE_LIMIT_MAX: '0',
    ...options.env,
  });
  const database = options.database ?? (await createTestDatabase());
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter((l) => l.length > 0));
      cb();
    },
  });
  const app = await buildApp(config, { database, logStream });
  app.get(PAYMENTS_PROBE, { onRequest: [requireScope('read:sessionpayment')] }, async (request) => principalOf(request));
  app.get(ASSETS_PROBE, { onRequest: [requireScope('write:chargingstationmodel'), requireAdmin()] }, async (request) => principalOf(request));
  await options.routes?.(app);
  await app.ready();
  return {
    app,
    config,
    database,
    bearer({ scopes, network, admin, clientId }) {
      const tokens = app.services.tokens;
      if (!tokens) throw new Error('bearer() needs the embedded issuer');
      const { access_token } = tokens.issue({ clientId: clientId ?? 'cli_test', scopes, network: network ?? null, isAdmin: admin ?? false });
      return `Bearer ${access_token}`;
    },
    logLines: () => lines,
    async signingKey() {
      const row = (await listVerificationKeys(database.db)).find((k) => k.alg === config.auth.signingAlg);
      if (!row) throw new Error('no signing key');
      const privatePem = createPrivateKey({ key: row.privateJwk, format: 'jwk' }).export({ type: 'pkcs8', format: 'pem' }).toString();
      return { kid: row.kid, alg: row.alg as 'ES256' | 'RS256', privatePem };
    },
    async close() {
      await app.close();
      if (!options.database) await database.close();
    },
  };
}

// A port that was free a moment ago (for apps whose issuer URL must name their own port).
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
