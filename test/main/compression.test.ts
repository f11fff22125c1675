import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { READ, RECORD_URL, listPayments, recordPayment } from '../helpers/payments-factory.js';
import { useTestApp } from '../helpers/test-app.js';

// Responses are compressed for clients that ask (br or gzip), never for those that do not, and not
// when the body is too small to gain anything. Request bodies are never inflated.
describe('response compression', () => {
  const t = useTestApp();
  let query = '';

  beforeAll(async () => {
    const sessions: string[] = [];
    for (let i = 0; i < 100; i++) sessions.push((await recordPayment(t)).session);
    query = `sessionIds=${sessions.join(',')}`;
  });

  it('sends the 100-ID list as it is to a client that does not ask', async () => {
    const res = await listPayments(t, query);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect((res.json() as unknown[]).length).toBe(100);
    // the list is large enough that compression matters
    expect(res.rawPayload.length).toBeGreaterThan(50_000);
    for (const encoding of ['identity', 'deflate', 'compress', '*;q=0, identity']) {
      const plain = await t.app.inject({ url: `/payments/v1/session-payments?${query}`, headers: { authorization: t.bearer({ scopes: [READ] }), 'accept-encoding': encoding } });
      expect(plain.headers['content-encoding'], encoding).toBeUndefined();
      expect(plain.body).toBe(res.body);
    }
  });

  it('compresses it with gzip or brotli for a client that asks, to the same JSON', async () => {
    const authorization = t.bearer({ scopes: [READ] });
    const plain = await listPayments(t, query, authorization);
    const cases = [
      { accept: 'gzip', expected: 'gzip', inflate: gunzipSync },
      { accept: 'br', expected: 'br', inflate: brotliDecompressSync },
      { accept: 'gzip, deflate, br', expected: 'br', inflate: brotliDecompressSync },
      { accept: 'br;q=0.5, gzip', expected: 'gzip', inflate: gunzipSync },
    ];
    for (const { accept, expected, inflate } of cases) {
      const res = await t.app.inject({ url: `/payments/v1/session-payments?${query}`, headers: { authorization, 'accept-encoding': accept } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-encoding'], accept).toBe(expected);
      expect(String(res.headers['vary'])).toMatch(/accept-encoding/i);
      expect(res.rawPayload.length).toBeLessThan(plain.rawPayload.length / 4);
      expect(inflate(res.rawPayload).toString()).toBe(plain.body);
      // the request id and the other headers are still there
      expect(res.headers['x-request-id']).toBeDefined();
      expect(res.headers['content-type']).toMatch(/^application\/json/);
    }
  });

  it('leaves small bodies as they are, errors included', async () => {
    for (const url of ['/healthz', '/payments/v1/session-payments?sessionIds=', '/nope']) {
      const res = await t.app.inject({ url, headers: { authorization: t.bearer({ scopes: [READ] }), 'accept-encoding': 'gzip, br' } });
      expect(res.rawPayload.length).toBeLessThan(1024);
      expect(res.headers['content-encoding'], url).toBeUndefined();
      expect(() => JSON.parse(res.body) as unknown).not.toThrow();
    }
  });

  it('compresses /metrics for a scraper that asks (Prometheus does)', async () => {
    const res = await t.app.inject({ url: '/metrics', headers: { 'accept-encoding': 'gzip' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(res.rawPayload).toString()).toContain('# TYPE http_request_duration_seconds histogram');
  });

  it('never inflates a compressed request body: it stays the family’s 400 and records nothing', async () => {
    const body = gzipSync(JSON.stringify({ network: 'net_gz' }));
    const res = await t.app.inject({
      method: 'POST',
      url: RECORD_URL,
      headers: { authorization: t.bearer({ scopes: ['write:sessionpayment'] }), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: body,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ success: false, error: { name: 'ZodError' } });
  });
});
