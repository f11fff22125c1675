import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/auth/clients-service.js';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp, type ProbeApp } from '../helpers/probe-app.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { MODEL_ADMIN, modelBody } from '../helpers/asset-factory.js';
import { RECORD_URL, listPayments, paymentBody, writer } from '../helpers/payments-factory.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface LogLine {
  level: number;
  msg: string;
  reqId?: string;
  method?: string;
  url?: string;
  statusCode?: number;
  [key: string]: unknown;
}

describe('errors, request ids, logs, metrics and docs', () => {
  let t: ProbeApp;
  const parsedLogs = () => t.logLines().map((l) => JSON.parse(l) as LogLine);

  beforeAll(async () => {
    // trace: the most verbose level must still keep credentials out of the log
    t = await createProbeApp({ captureLogs: true, env: { LOG_LEVEL: 'trace' } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers unknown routes with 404 { message }, in every family and without a token', async () => {
    for (const url of ['/nope', '/payments/v1/nope', '/asset-management/v1/nope?x=1', '/oauth/nope']) {
      const res = await t.app.inject({ url });
      expect(res.statusCode).toBe(404);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['message']);
      expect(typeof body.message).toBe('string');
    }
    // A known path with another method is a 405 (with Allow), still { message } outside the API families.
    const post = await t.app.inject({ method: 'DELETE', url: '/healthz' });
    expect(post.statusCode).toBe(405);
    expect(Object.keys(post.json() as object)).toEqual(['message']);
  });

  it('echoes a valid x-request-id and logs the request under it', async () => {
    const res = await t.app.inject({ url: '/.well-known/jwks.json', headers: { 'x-request-id': 'lb-trace.42:abc_DEF-9' } });
    expect(res.headers['x-request-id']).toBe('lb-trace.42:abc_DEF-9');
    const line = parsedLogs().find((l) => l.reqId === 'lb-trace.42:abc_DEF-9' && l.msg === 'request completed');
    expect(line).toMatchObject({ method: 'GET', url: '/.well-known/jwks.json', statusCode: 200 });
  });

  it('logs health, readiness and metrics probes at debug, so a healthcheck every few seconds adds no info lines', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics']) {
      const res = await t.app.inject({ url, headers: { 'x-request-id': `probe-${url.slice(1)}` } });
      expect(res.statusCode).toBe(200);
    }
    const lines = parsedLogs().filter((l) => String(l.reqId).startsWith('probe-') && l.msg === 'request completed');
    // pino's levels: 20 debug, 30 info
    expect(lines.map((l) => [l.url, l.level])).toEqual([['/healthz', 20], ['/readyz', 20], ['/metrics', 20]]);
    expect(parsedLogs().find((l) => l.reqId === 'lb-trace.42:abc_DEF-9' && l.msg === 'request completed')).toMatchObject({ level: 30 });
  });

  it('generates a request id when none is sent, and replaces an unusable one', async () => {
    const none = await t.app.inject({ url: '/healthz' });
    expect(none.headers['x-request-id']).toMatch(UUID);

    for (const bad of ['has spaces', 'x'.repeat(129), 'inject"quote', 'semi;colon', '']) {
      const res = await t.app.inject({ url: '/healthz', headers: { 'x-request-id': bad } });
      expect(res.headers['x-request-id']).toMatch(UUID);
    }
  });

  it('sends the request id on error responses too', async () => {
    const unauthorized = await t.app.inject({ url: PAYMENTS_PROBE, headers: { 'x-request-id': 'err-401' } });
    expect(unauthorized.statusCode).toBe(401);
    expect(unauthorized.headers['x-request-id']).toBe('err-401');
    const missing = await t.app.inject({ url: '/missing', headers: { 'x-request-id': 'err-404' } });
    expect(missing.headers['x-request-id']).toBe('err-404');
    expect(parsedLogs().find((l) => l.reqId === 'err-404' && l.msg === 'request completed')).toMatchObject({ statusCode: 404 });
  });

  it('writes exactly one completion line per request', async () => {
    for (let i = 0; i < 3; i++) await t.app.inject({ url: '/.well-known/jwks.json', headers: { 'x-request-id': `count-${i}` } });
    for (let i = 0; i < 3; i++) {
      expect(parsedLogs().filter((l) => l.reqId === `count-${i}` && l.msg === 'request completed')).toHaveLength(1);
    }
  });

  it('never logs bearer tokens, client secrets or Basic credentials', async () => {
    const c = await createClient(t.database.db, { name: 'log-check', scopes: ['read:sessionpayment'] });
    const basic = Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64');

    const viaBasic = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
      payload: 'grant_type=client_credentials',
    });
    expect(viaBasic.statusCode).toBe(200);
    const accessToken = (viaBasic.json() as { access_token: string }).access_token;

    const viaPost = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret }),
    });
    expect(viaPost.statusCode).toBe(200);

    // failures are logged too; they must not carry what was presented
    const wrongSecret = `${c.clientSecret.slice(0, -4)}AAAA`;
    await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `grant_type=client_credentials&client_id=${c.clientId}&client_secret=${wrongSecret}`,
    });
    await t.app.inject({ method: 'POST', url: `/oauth/token?client_secret=${c.clientSecret}`, payload: {} });
    await t.app.inject({ url: `${PAYMENTS_PROBE}?access_token=${accessToken}` });

    const ok = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: `Bearer ${accessToken}` } });
    expect(ok.statusCode).toBe(200);
    const tampered = `${accessToken.slice(0, -6)}AAAAAA`;
    const rejected = await t.app.inject({ url: ASSETS_PROBE, headers: { authorization: `Bearer ${tampered}` } });
    expect(rejected.statusCode).toBe(401);

    const log = t.logLines().join('\n');
    expect(log.length).toBeGreaterThan(0);
    for (const secret of [c.clientSecret, wrongSecret, basic, accessToken, tampered, accessToken.split('.')[2]!]) {
      expect(log).not.toContain(secret);
    }
  });

  it('exposes Prometheus metrics with the request duration histogram', async () => {
    await t.app.inject({ url: '/healthz' });
    await t.app.inject({ url: '/no/such/route/12345' });
    const res = await t.app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).toContain('# TYPE http_request_duration_seconds histogram');
    expect(res.body).toMatch(/http_request_duration_seconds_bucket\{[^}]*route="\/healthz"[^}]*\}/);
    // unmatched paths share one label, so random URLs cannot multiply the series
    expect(res.body).toContain('route="unmatched"');
    expect(res.body).not.toContain('/no/such/route/12345');
  });

  it('serves an OpenAPI 3.1 document that includes the token endpoint', async () => {
    const res = await t.app.inject({ url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, unknown>; components: { securitySchemes: Record<string, unknown> } };
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.paths).toHaveProperty('/oauth/token');
    expect(doc.components.securitySchemes).toHaveProperty('bearerAuth');
    // probes and test-only routes are not part of the published API
    expect(doc.paths).not.toHaveProperty('/healthz');
    expect(doc.paths).not.toHaveProperty('/metrics');
  });

  it('serves the API reference page without a token', async () => {
    const res = await t.app.inject({ url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toMatch(/<html/i);
  });

  it('needs no token for the health, readiness and metrics probes', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/.well-known/jwks.json']) {
      expect((await t.app.inject({ url })).statusCode).toBe(200);
    }
  });
});

describe('readiness', () => {
  it('answers 503 { message } once the database stops answering', async () => {
    const database = await createTestDatabase();
    const t = await createProbeApp({ database });
    try {
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);
      await database.close();
      const res = await t.app.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['message']);
      expect(typeof body.message).toBe('string');
      // liveness is about the process, not its dependencies
      expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});

// docs/api.md, "Errors": a 400 lists at most 100 issues (the first found) and its body stays under 20 KB.
describe('bounded 400s', () => {
  const MAX_BODY_BYTES = 20 * 1024;
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  it('lists the first 100 issues of a session list with 10,000 blank entries', async () => {
    const res = await listPayments(t, `sessionIds=a${','.repeat(10_000)}`);
    expect(res.statusCode).toBe(400);
    expect(res.rawPayload.length).toBeLessThan(MAX_BODY_BYTES);
    const issues = (res.json() as { error: { issues: { code: string; path: unknown[] }[] } }).error.issues;
    expect(issues).toHaveLength(100);
    expect(issues[0]).toMatchObject({ code: 'too_small', path: ['sessionIds', 1] });
    expect(issues[99]).toMatchObject({ code: 'too_small', path: ['sessionIds', 100] });
  });

  it('keeps an asset-management 400 with thousands of problems under 20 KB, naming the first', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/asset-management/v1/charging-station-models',
      headers: { authorization: t.bearer(MODEL_ADMIN) },
      // 32 connectors (the most allowed), each missing every field and carrying 100 unknown keys
      payload: modelBody({
        connectors: Array.from({ length: 32 }, () => Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`unknown${i}`, 0]))),
      }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.rawPayload.length).toBeLessThan(MAX_BODY_BYTES);
    const body = res.json() as { type: string; code: string; message: string };
    expect(body).toMatchObject({ type: 'BAD_REQUEST', code: 'INVALID_REQUEST_PARAMETERS' });
    expect(body.message.startsWith('connectors.0')).toBe(true);
  });

  it('keeps a 400 for a 60 KB unknown key under 20 KB in both families', async () => {
    const key = 'k'.repeat(60_000);
    const payments = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: { ...paymentBody(), [key]: 1 } });
    const assets = await t.app.inject({
      method: 'POST',
      url: '/asset-management/v1/charging-station-models',
      headers: { authorization: t.bearer(MODEL_ADMIN) },
      payload: { ...modelBody(), [key]: 1 },
    });
    for (const res of [payments, assets]) {
      expect(res.statusCode).toBe(400);
      expect(res.rawPayload.length).toBeLessThan(MAX_BODY_BYTES);
    }
    expect(payments.json()).toMatchObject({ success: false, error: { name: 'ZodError', issues: [{ code: 'unrecognized_keys', path: [] }] } });
  });

  it('stays under 20 KB for any unknown keys, control and astral characters included', async () => {
    const keys = fc.dictionary(fc.string({ unit: 'binary', minLength: 1000, maxLength: 2500 }), fc.constant(0), { minKeys: 1, maxKeys: 6 });
    await fc.assert(
      fc.asyncProperty(keys, fc.constantFrom(RECORD_URL, '/asset-management/v1/charging-station-models'), async (extra, url) => {
        const body = url === RECORD_URL ? paymentBody() : modelBody();
        const authorization = url === RECORD_URL ? writer(t) : t.bearer(MODEL_ADMIN);
        const res = await t.app.inject({ method: 'POST', url, headers: { authorization }, payload: { ...body, ...extra } });
        expect(res.statusCode).toBe(400);
        expect(res.rawPayload.length).toBeLessThan(MAX_BODY_BYTES);
      }),
      { numRuns: 40 },
    );
  });

  it('keeps the token endpoint error under 20 KB when it echoes a huge field', async () => {
    const client = await createClient(t.database.db, { name: 'bounded-400', scopes: ['read:sessionpayment'] });
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/json' },
      payload: { grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret, scope: '\u0001'.repeat(4000) },
    });
    expect(res.statusCode).toBe(400);
    expect(res.rawPayload.length).toBeLessThan(MAX_BODY_BYTES);
    expect(Object.keys(res.json() as object)).toEqual(['error', 'error_description']);
  });
});

describe('a 500 from a failed SQL statement', () => {
  const FAILING = '/payments/v1/_failing-query';
  const SECRET = 'scrypt$N=32768,r=8,p=1$c2VjcmV0LXNhbHQ$c2VjcmV0LWtleQ';

  it('answers the generic body and logs the SQLSTATE and SQL text, never the query parameters', async () => {
    const t = await createTestApp({
      captureLogs: true,
      routes: (app) => {
        app.get(FAILING, { config: { public: true } }, async () => {
          // a bug-class error (22P02: not an integer), with a secret among the parameters
          await app.database.db.execute(sql`select ${SECRET}::int`);
          return {};
        });
      },
    });
    try {
      const res = await t.app.inject({ url: FAILING });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ code: 'INTERNAL_SERVER_ERROR', message: 'Internal server error', status: 500 });
      const lines = t.logLines().filter((l) => l.includes('request failed'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain('22P02');
      expect(lines[0]).toContain('::int');
      expect(t.logLines().join('\n')).not.toContain('c2VjcmV0');
    } finally {
      await t.close();
    }
  });
});
