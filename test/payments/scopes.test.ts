// Authentication and scopes of every payments route (docs/api.md, "Operations and scopes"): 401 → 403 → 400.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';
import { LIST_URL, READ, RECORD_URL, WRITE, collectUrl, oneUrl, paymentBody, recordPayment } from '../helpers/payments-factory.js';

const t = useTestApp();

interface Route {
  name: string;
  allowed: string[][];
  denied: string;
  // a valid request, freshly prepared for each call
  request: () => Promise<{ method: 'GET' | 'POST'; url: string; payload?: Record<string, unknown> }>;
  // an invalid request: must still be 401/403 before it is 400
  invalid: { method: 'GET' | 'POST'; url: string; payload?: string };
  ok: number;
}

const READERS = 'Access token needs one of the scopes read:sessionpayment, write:sessionpayment';
const WRITERS = 'Access token lacks the scope write:sessionpayment';

const routes: Route[] = [
  {
    name: 'GET list',
    allowed: [[READ], [WRITE], [READ, WRITE]],
    denied: READERS,
    request: async () => ({ method: 'GET', url: `${LIST_URL}?sessionIds=a,b` }),
    invalid: { method: 'GET', url: `${LIST_URL}?sessionIds=` },
    ok: 200,
  },
  {
    name: 'GET one',
    allowed: [[READ], [WRITE]],
    denied: READERS,
    request: async () => ({ method: 'GET', url: oneUrl((await recordPayment(t)).id) }),
    invalid: { method: 'GET', url: oneUrl('\u0001') },
    ok: 200,
  },
  {
    name: 'POST record',
    allowed: [[WRITE], [READ, WRITE]],
    denied: WRITERS,
    request: async () => ({ method: 'POST', url: RECORD_URL, payload: paymentBody() as unknown as Record<string, unknown> }),
    invalid: { method: 'POST', url: RECORD_URL, payload: '{"network":' },
    ok: 201,
  },
  {
    name: 'POST collect',
    allowed: [[WRITE], [READ, WRITE]],
    denied: WRITERS,
    request: async () => ({ method: 'POST', url: collectUrl((await recordPayment(t)).id) }),
    invalid: { method: 'POST', url: collectUrl('pmt_x'), payload: '{"when":1}' },
    ok: 200,
  },
];

const DENIED_SCOPES = [[], ['read:asset'], ['read:session', 'write:session', 'read:payment_terminals_payment']];

describe.each(routes)('$name', (route) => {
  it('answers a token with an allowed scope', async () => {
    for (const scopes of route.allowed) {
      const res = await t.app.inject({ ...(await route.request()), headers: { authorization: t.bearer({ scopes }) } });
      expect(res.statusCode, `${scopes.join(' ')}: ${res.body}`).toBe(route.ok);
    }
  });

  it('403 FORBIDDEN for a token without an allowed scope, before validation', async () => {
    const scopeSets = route.denied === WRITERS ? [...DENIED_SCOPES, [READ]] : DENIED_SCOPES;
    for (const scopes of scopeSets) {
      for (const request of [await route.request(), route.invalid]) {
        const res = await t.app.inject({
          ...request,
          headers: { authorization: t.bearer({ scopes, network: 'net_a' }), 'content-type': 'application/json' },
        });
        expect(res.statusCode, scopes.join(' ')).toBe(403);
        expect(res.json()).toEqual({ code: 'FORBIDDEN', message: route.denied, status: 403 });
      }
    }
  });

  it('401 { message } without a usable token, before scope and validation', async () => {
    const cases: [Record<string, string>, string][] = [
      [{}, 'Access token is missing'],
      [{ authorization: 'Bearer not-a-jwt' }, 'Access token is invalid or expired'],
      [{ authorization: `${t.bearer({ scopes: [READ, WRITE] })}x` }, 'Access token is invalid or expired'],
      [{ authorization: 'Basic dXNlcjpwYXNz' }, 'Authorization header must be "Bearer <access token>"'],
    ];
    for (const [headers, message] of cases) {
      for (const request of [await route.request(), route.invalid]) {
        const res = await t.app.inject({ ...request, headers: { ...headers, 'content-type': 'application/json' } });
        expect(res.statusCode, message).toBe(401);
        expect(res.json()).toEqual({ message });
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      }
    }
  });

  it('400 for an invalid request once the token and scope are right', async () => {
    const res = await t.app.inject({
      ...route.invalid,
      headers: { authorization: t.bearer({ scopes: [READ, WRITE] }), 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ success: false, error: { name: 'ZodError' } });
  });
});

it('the OpenAPI document describes the four payments routes', async () => {
  const doc = (await t.app.inject({ url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { tags: string[]; responses: Record<string, unknown> }>> };
  const ops = [
    doc.paths['/payments/v1/session-payments']?.get,
    doc.paths['/payments/v1/session-payments']?.post,
    doc.paths['/payments/v1/session-payments/{id}']?.get,
    doc.paths['/payments/v1/session-payments/{id}/collect']?.post,
  ];
  for (const op of ops) {
    expect(op?.tags).toEqual(['payments']);
    expect(Object.keys(op?.responses ?? {})).toEqual(expect.arrayContaining(['400', '401', '403']));
  }
});
