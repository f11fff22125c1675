import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { createClient, revokeClient } from '../../src/auth/clients-service.js';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp, freePort, type ProbeApp } from '../helpers/probe-app.js';

// Rate limits: per verified client for authenticated requests, per address for the rest, a
// stricter bucket of its own for the token endpoint; the IETF RateLimit fields beside X-RateLimit-*.

const PUBLIC_URL = '/.well-known/jwks.json';
const READER = { scopes: ['read:sessionpayment', 'write:chargingstationmodel'], admin: true };

// RateLimit-Policy and RateLimit as draft-ietf-httpapi-ratelimit-headers-10 writes them: a list of
// one item here, the quoted policy name with its parameters.
function fields(res: LightMyRequestResponse) {
  const policy = /^"(client|address|token)";q=(\d+);w=(\d+)$/.exec(String(res.headers['ratelimit-policy']));
  const state = /^"(client|address|token)";r=(\d+);t=(\d+)$/.exec(String(res.headers['ratelimit']));
  expect(policy, `RateLimit-Policy: ${String(res.headers['ratelimit-policy'])}`).not.toBeNull();
  expect(state, `RateLimit: ${String(res.headers['ratelimit'])}`).not.toBeNull();
  expect(state![1]).toBe(policy![1]);
  return { policy: policy![1], quota: Number(policy![2]), window: Number(policy![3]), remaining: Number(state![2]), reset: Number(state![3]) };
}

function tokenRequest(t: ProbeApp, secret = 'guess') {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `grant_type=client_credentials&client_id=cli_x&client_secret=${secret}`,
  });
}

async function withApp(env: Record<string, string>, run: (t: ProbeApp) => Promise<void>) {
  const t = await createProbeApp({ env });
  try {
    await run(t);
  } finally {
    await t.close();
  }
}

const small = { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '60' };

describe('rate limiting', () => {
  it('answers the 4th request in the window with 429 { message }, Retry-After and the fields at zero', async () => {
    await withApp(small, async (t) => {
      for (let i = 0; i < 3; i++) {
        const res = await t.app.inject({ url: PUBLIC_URL });
        expect(res.statusCode).toBe(200);
        expect(fields(res)).toEqual({ policy: 'address', quota: 3, window: 60, remaining: 2 - i, reset: expect.any(Number) });
        expect(res.headers['x-ratelimit-limit']).toBe('3');
        expect(res.headers['x-ratelimit-remaining']).toBe(String(2 - i));
        expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
        expect(res.headers['retry-after']).toBeUndefined();
      }
      const res = await t.app.inject({ url: PUBLIC_URL });
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual({ message: expect.stringMatching(/^Too many requests/) });
      const f = fields(res);
      expect(f).toMatchObject({ policy: 'address', quota: 3, remaining: 0 });
      expect(f.reset).toBeGreaterThan(0);
      expect(f.reset).toBeLessThanOrEqual(60);
      expect(res.headers['retry-after']).toBe(String(f.reset));
      expect(res.headers['x-ratelimit-remaining']).toBe('0');
    });
  });

  it('never limits the health, readiness and metrics probes, does not count them and adds no fields', async () => {
    await withApp(small, async (t) => {
      for (let i = 0; i < 10; i++) {
        for (const url of ['/healthz', '/readyz', '/metrics']) {
          const res = await t.app.inject({ url });
          expect(res.statusCode).toBe(200);
          expect(res.headers['ratelimit']).toBeUndefined();
        }
      }
      // the probes above used none of the budget: three ordinary requests still pass
      for (let i = 0; i < 3; i++) expect((await t.app.inject({ url: PUBLIC_URL })).statusCode).toBe(200);
      expect((await t.app.inject({ url: PUBLIC_URL })).statusCode).toBe(429);
    });
  });

  it('counts each verified client on its own budget, apart from its address', async () => {
    await withApp(small, async (t) => {
      const a = t.bearer({ ...READER, clientId: 'cli_a' });
      const b = t.bearer({ ...READER, clientId: 'cli_b' });
      for (let i = 0; i < 3; i++) {
        const res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: a } });
        expect(res.statusCode).toBe(200);
        expect(fields(res)).toMatchObject({ policy: 'client', quota: 3, remaining: 2 - i });
      }
      expect((await t.app.inject({ url: ASSETS_PROBE, headers: { authorization: a } })).statusCode).toBe(429);
      // the same address, another client: a budget of its own
      const other = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: b } });
      expect(other.statusCode).toBe(200);
      expect(fields(other)).toMatchObject({ policy: 'client', remaining: 2 });
      // and requests without a token count against the address, untouched by either client
      const anonymous = await t.app.inject({ url: PUBLIC_URL });
      expect(anonymous.statusCode).toBe(200);
      expect(fields(anonymous)).toMatchObject({ policy: 'address', remaining: 2 });
    });
  });

  it('keeps 429 as { message } in the payments and asset-management families', async () => {
    await withApp(small, async (t) => {
      const authorization = t.bearer(READER);
      for (let i = 0; i < 3; i++) expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } })).statusCode).toBe(200);
      for (const url of [PAYMENTS_PROBE, ASSETS_PROBE, '/payments/v1/session-payments?sessionIds=a']) {
        const res = await t.app.inject({ url, headers: { authorization } });
        expect(res.statusCode).toBe(429);
        expect(Object.keys(res.json() as object)).toEqual(['message']);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.headers['www-authenticate']).toBeUndefined();
      }
    });
  });

  it('counts tokens that fail verification by address, whatever client they claim (token spraying)', async () => {
    await withApp(small, async (t) => {
      // a well-formed token claiming a chosen client_id, with a signature that does not verify
      const forged = (clientId: string) => t.bearer({ ...READER, clientId }).replace(/\.[^.]+$/, '.c2lnbmF0dXJl');
      for (let i = 0; i < 3; i++) {
        const res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: forged(`cli_spray_${i}`) } });
        expect(res.statusCode).toBe(401);
        expect(fields(res)).toMatchObject({ policy: 'address', remaining: 2 - i });
      }
      const res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: forged('cli_spray_fresh') } });
      expect(res.statusCode).toBe(429);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      // a garbage header, no token at all: the same address bucket
      expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: 'Bearer x' } })).statusCode).toBe(429);
      expect((await t.app.inject({ url: PAYMENTS_PROBE })).statusCode).toBe(429);
      // the sprayer's address is spent; a real client's budget is not
      const genuine = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: t.bearer(READER) } });
      expect(genuine.statusCode).toBe(200);
      expect(fields(genuine)).toMatchObject({ policy: 'client', remaining: 2 });
    });
  });

  it('counts a revoked client’s valid-looking tokens by address', async () => {
    await withApp({ ...small, AUTH_REVOCATION_REFRESH_SECONDS: '1' }, async (t) => {
      const client = await createClient(t.database.db, { name: 'rate-revoked', scopes: ['read:sessionpayment'] });
      const authorization = t.bearer({ scopes: ['read:sessionpayment'], clientId: client.clientId });
      const before = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } });
      expect(before.statusCode).toBe(200);
      expect(fields(before).policy).toBe('client');
      await revokeClient(t.database.db, client.clientId);
      // the revocation list is reread on a timer; wait for this process to see it
      let res = before;
      for (let i = 0; i < 200 && res.statusCode !== 401; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } });
      }
      expect(res.statusCode).toBe(401);
      expect(fields(res).policy).toBe('address');
    });
  }, 30_000);

  it('counts requests for unknown URLs and wrong methods by address', async () => {
    await withApp(small, async (t) => {
      for (let i = 0; i < 2; i++) expect((await t.app.inject({ url: `/scan/${i}`, headers: { authorization: t.bearer(READER) } })).statusCode).toBe(404);
      expect((await t.app.inject({ method: 'DELETE', url: PUBLIC_URL })).statusCode).toBe(405);
      expect((await t.app.inject({ url: '/scan/4' })).statusCode).toBe(429);
    });
  });

  it('gives the token endpoint its own, stricter bucket per address', async () => {
    await withApp({ ...small, RATE_LIMIT_TOKEN_MAX: '2' }, async (t) => {
      for (let i = 0; i < 2; i++) {
        const res = await tokenRequest(t);
        expect(res.statusCode).toBe(401);
        expect(fields(res)).toMatchObject({ policy: 'token', quota: 2, window: 60, remaining: 1 - i });
      }
      const res = await tokenRequest(t);
      expect(res.statusCode).toBe(429);
      // RFC 6749 §5.2 names no body for 429: the { message } of every family
      expect(Object.keys(res.json() as object)).toEqual(['message']);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      // a correct secret is refused too: guessing must not be able to tell the two apart
      const client = await createClient(t.database.db, { name: 'rate-token', scopes: ['read:sessionpayment'] });
      const real = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=client_credentials&client_id=${client.clientId}&client_secret=${client.clientSecret}`,
      });
      expect(real.statusCode).toBe(429);
      // the rest of the address's budget is untouched by the token requests
      const other = await t.app.inject({ url: PUBLIC_URL });
      expect(other.statusCode).toBe(200);
      expect(fields(other)).toMatchObject({ policy: 'address', remaining: 2 });
    });
  });

  it('lets a test suite fetch tokens: 120 a minute per address by default', async () => {
    // the test apps turn limits off unless told; the service's defaults are pinned in config.test.ts
    await withApp({ RATE_LIMIT_MAX: '6000' }, async (t) => {
      expect(t.config.rateLimit).toMatchObject({ max: 6000, tokenMax: 120, windowSeconds: 60 });
      const first = await tokenRequest(t);
      expect(fields(first)).toMatchObject({ policy: 'token', quota: 120, remaining: 119 });
      const general = await t.app.inject({ url: PUBLIC_URL });
      expect(fields(general)).toMatchObject({ policy: 'address', quota: 6000, remaining: 5999 });
    });
  });

  it('RATE_LIMIT_TOKEN_MAX=0 leaves the token endpoint unlimited; RATE_LIMIT_MAX=0 turns every limit off', async () => {
    await withApp({ ...small, RATE_LIMIT_TOKEN_MAX: '0' }, async (t) => {
      for (let i = 0; i < 5; i++) {
        const res = await tokenRequest(t);
        expect(res.statusCode).toBe(401);
        expect(res.headers['ratelimit']).toBeUndefined();
      }
      expect(fields(await t.app.inject({ url: PUBLIC_URL }))).toMatchObject({ policy: 'address', remaining: 2 });
    });
    await withApp({ RATE_LIMIT_MAX: '0', RATE_LIMIT_TOKEN_MAX: '1' }, async (t) => {
      for (let i = 0; i < 3; i++) {
        const token = await tokenRequest(t);
        expect(token.statusCode).toBe(401);
        const res = await t.app.inject({ url: PUBLIC_URL });
        expect(res.statusCode).toBe(200);
        for (const name of ['ratelimit', 'ratelimit-policy', 'x-ratelimit-limit']) expect(res.headers[name]).toBeUndefined();
      }
    });
  });

  it('counts the first request after start-up in Redis: start-up waits for the connection', async () => {
    const prefix = `cns-test:rate-limit-start:${randomUUID()}:`;
    await withApp({ ...small, REDIS_URL: 'redis://127.0.0.1:6379', RATE_LIMIT_REDIS_PREFIX: prefix }, async (t) => {
      const res = await t.app.inject({ url: PUBLIC_URL });
      expect(res.statusCode).toBe(200);
      expect(fields(res)).toMatchObject({ policy: 'address', quota: 3, remaining: 2 });
    });
  });

  it('keeps serving when the Redis that holds the counters cannot be reached, counting nothing', async () => {
    const closedPort = await freePort();
    await withApp({ ...small, REDIS_URL: `redis://127.0.0.1:${closedPort}` }, async (t) => {
      for (let i = 0; i < 5; i++) {
        const res = await t.app.inject({ url: PUBLIC_URL });
        expect(res.statusCode).toBe(200);
        // nothing was counted, so there is nothing true to say about the budget
        expect(res.headers['ratelimit']).toBeUndefined();
        expect(res.headers['x-ratelimit-remaining']).toBeUndefined();
      }
      expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: t.bearer(READER) } })).statusCode).toBe(200);
    });
  });
});
