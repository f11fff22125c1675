import { createPrivateKey } from 'node:crypto';
import { createServer } from 'node:net';
import type { FastifyRequest, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { requireAdmin, requireScope } from '../../src/auth/auth-plugin.js';
import { listVerificationKeys } from '../../src/auth/signing-keys-repository.js';
import { createTestApp, type TestApp, type TestAppOptions } from './test-app.js';

// Routes that exist only in tests of the shared plumbing: they exercise the auth pipeline (token → scope/role)
// in both error families without depending on the real payments / asset-management routes.
export const PAYMENTS_PROBE = '/payments/v1/_probe';
export const ASSETS_PROBE = '/asset-management/v1/_probe';

export interface ProbeApp extends TestApp {
  // The embedded issuer's active signing key, to forge tokens with chosen claims.
  signingKey(): Promise<{ kid: string; alg: 'ES256' | 'RS256'; privatePem: string }>;
}

export type ProbeAppOptions = TestAppOptions;

function principalOf(request: FastifyRequest) {
  return { principal: { ...request.principal, scopes: [...request.principal.scopes].sort() } };
}

export async function createProbeApp(options: ProbeAppOptions = {}): Promise<ProbeApp> {
  const t = await createTestApp({
    ...options,
    routes: async (app) => {
      app.get(PAYMENTS_PROBE, { onRequest: [requireScope('read:sessionpayment')] }, async (request) => principalOf(request));
      app.get(ASSETS_PROBE, { onRequest: [requireScope('write:chargingstationmodel'), requireAdmin()] }, async (request) => principalOf(request));
      await options.routes?.(app);
    },
  });
  return {
    ...t,
    async signingKey() {
      const row = (await listVerificationKeys(t.database.db)).find((k) => k.alg === t.config.auth.signingAlg);
      if (!row) throw new Error('no signing key');
      const privatePem = createPrivateKey({ key: row.privateJwk, format: 'jwk' }).export({ type: 'pkcs8', format: 'pem' }).toString();
      return { kid: row.kid, alg: row.alg as 'ES256' | 'RS256', privatePem };
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

// What a request gets when the database fails under authentication (a key reload, the revocation
// list): not a 401, the token may be fine; the payments family's 503, with no challenge and no stack.
export function expectPaymentsDatabaseUnavailable(res: LightMyRequestResponse): void {
  expect(res.statusCode).toBe(503);
  expect(res.headers['www-authenticate']).toBeUndefined();
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  expect(res.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), status: 503 });
  expect(res.body).not.toMatch(/\n\s+at /);
}
