// A known path asked with a method it does not serve: 405 with Allow, in the family's shape
// (docs/api.md, "Errors"), derived from the registered routes.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../../helpers/test-app.js';

const t = useTestApp();

async function ask(method: 'DELETE' | 'PUT' | 'PATCH' | 'POST' | 'GET', url: string) {
  return t.app.inject({ method, url });
}

describe('wrong method on a known path', () => {
  it('payments: { code: METHOD_NOT_ALLOWED, message, status: 405 } with Allow, before any token is asked for', async () => {
    const list = await ask('DELETE', '/payments/v1/session-payments?sessionIds=ses_1');
    expect(list.statusCode).toBe(405);
    expect(list.headers.allow).toBe('GET, HEAD, POST');
    expect(list.json()).toEqual({ code: 'METHOD_NOT_ALLOWED', message: expect.stringContaining('DELETE'), status: 405 });

    const collect = await ask('PUT', '/payments/v1/session-payments/sp_1/collect');
    expect(collect.statusCode).toBe(405);
    expect(collect.headers.allow).toBe('POST');
    expect(collect.json()).toMatchObject({ code: 'METHOD_NOT_ALLOWED', status: 405 });
  });

  it('asset management: { type, code: METHOD_NOT_ALLOWED, message } with Allow', async () => {
    const one = await ask('DELETE', '/asset-management/v1/assets/CP-1');
    expect(one.statusCode).toBe(405);
    expect(one.headers.allow).toBe('GET, HEAD');
    expect(one.json()).toEqual({ type: 'METHOD_NOT_ALLOWED', code: 'METHOD_NOT_ALLOWED', message: expect.stringContaining('DELETE') });

    const models = await ask('PATCH', '/asset-management/v1/charging-station-models/');
    expect(models.statusCode).toBe(405);
    expect(models.headers.allow).toBe('GET, HEAD, POST');
    expect(models.json()).toMatchObject({ type: 'METHOD_NOT_ALLOWED', code: 'METHOD_NOT_ALLOWED' });
  });

  it('the token endpoint and the probes: { message } with Allow', async () => {
    const token = await ask('GET', '/oauth/token');
    expect(token.statusCode).toBe(405);
    expect(token.headers.allow).toBe('POST');
    expect(token.json()).toEqual({ message: expect.stringContaining('GET') });

    const health = await ask('POST', '/healthz');
    expect(health.statusCode).toBe(405);
    expect(health.headers.allow).toBe('GET, HEAD');
    expect(health.json()).toEqual({ message: expect.any(String) });
  });

  it('an unknown path stays 404, and a served method is never answered 405', async () => {
    const unknown = await ask('DELETE', '/payments/v1/nothing-here');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers.allow).toBeUndefined();
    expect((await ask('GET', '/healthz')).statusCode).toBe(200);
    expect((await ask('GET', '/payments/v1/session-payments?sessionIds=ses_1')).statusCode).toBe(401);
  });
});
