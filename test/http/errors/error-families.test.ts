// The family registry: each API family registers its renderer under its own URL prefix, and every
// answer to a URL under that prefix takes the family's shapes, a URL no route serves included;
// a URL under no prefix is answered `{ message }`. Each family's answers are the bodies its table
// of shapes names for their status.
import { connect } from 'node:net';
import fc from 'fast-check';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ASSET_MANAGEMENT_ERRORS } from '../../../src/asset-management/asset-management-error-family.js';
import { OAUTH_ERRORS } from '../../../src/auth/oauth-error-family.js';
import { NotFoundError } from '../../../src/kernel/errors.js';
import { PAYMENTS_ERRORS } from '../../../src/payments/payments-error-family.js';
import { ErrorFamilies, serveErrorFamily, type ErrorFamily } from '../../../src/http/errors/error-families.js';
import { familyRenderer, renderPlainError, type ErrorRenderer } from '../../../src/http/errors/error-rendering.js';
import { describeErrorShapes, messageBody, type ErrorTable } from '../../../src/http/errors/error-shapes.js';
import { createTestApp, useTestApp } from '../../helpers/test-app.js';

// A renderer told apart by identity only: the registry's rules never call it.
const renderer = (): ErrorRenderer => (_error: unknown, _request: FastifyRequest, reply: FastifyReply) => reply;

describe('the registry (pure rules)', () => {
  const segment = fc.stringMatching(/^[a-z][a-z-]{0,11}$/);

  it('names the family whose prefix starts the URL, and `{ message }` (the plain renderer) for a URL under none', () => {
    fc.assert(
      fc.property(fc.uniqueArray(segment, { maxLength: 5 }), fc.string(), fc.nat(), (names, tail, pick) => {
        const families: ErrorFamily[] = names.map((name) => ({ name, prefix: `/${name}/`, render: renderer() }));
        const registry = new ErrorFamilies();
        for (const family of families) registry.register(family);
        // a URL under one of the prefixes, one that starts with a family's name but not its path,
        // or any text at all
        const family = families[pick % Math.max(families.length, 1)];
        const url = !family || pick % 3 === 0 ? tail : pick % 3 === 1 ? `${family.prefix}${tail}` : `/${family.name}${tail}`;
        const owner = families.find((candidate) => url.startsWith(candidate.prefix));
        expect(registry.rendererFor(url)).toBe(owner ? owner.render : renderPlainError);
      }),
    );
  });

  it('refuses a prefix that overlaps a registered one, in either order, and says which', () => {
    for (const [first, second] of [
      ['/payments/', '/payments/v2/'],
      ['/payments/v2/', '/payments/'],
      ['/payments/', '/payments/'],
    ] as const) {
      const registry = new ErrorFamilies();
      registry.register({ name: 'first', prefix: first, render: renderer() });
      expect(() => registry.register({ name: 'second', prefix: second, render: renderer() })).toThrow(`error family second (${second}) overlaps first (${first})`);
    }
    const registry = new ErrorFamilies();
    registry.register({ name: 'payments', prefix: '/payments/', render: renderer() });
    // '/payments-archive/' shares characters, not a path segment
    expect(() => registry.register({ name: 'archive', prefix: '/payments-archive/', render: renderer() })).not.toThrow();
  });

  it('refuses a prefix that is not a path starting and ending with "/"', () => {
    for (const prefix of ['/payments', 'payments/', '/', '']) {
      expect(() => new ErrorFamilies().register({ name: 'bad', prefix, render: renderer() }), prefix).toThrow('must be a path that starts and ends with "/"');
    }
  });

  it('describes a table by the shape most statuses take, then the others with their statuses', () => {
    const coded = z.object({ code: z.string(), message: z.string() });
    const issues = z.object({ issues: z.array(z.string()) });
    const table: ErrorTable = {
      400: { body: issues, means: '' },
      401: { body: messageBody, means: '' },
      404: { body: coded, means: '' },
      409: { body: coded, means: '' },
      429: { body: messageBody, means: '' },
      500: { body: coded, means: '' },
    };
    expect(describeErrorShapes(table)).toBe('Errors: `{ code, message }`; `{ issues }` for 400; `{ message }` for 401 and 429.');
    // a tie goes to the shape of the lowest status
    expect(describeErrorShapes({ 400: { body: coded, means: '' }, 401: { body: messageBody, means: '' } })).toBe('Errors: `{ code, message }`; `{ message }` for 401.');
  });
});

// A family of the tests' own, registered the way an area registers its family.
const WIDGETS_PREFIX = '/widgets/';
interface WidgetsBody {
  problem: string;
  status: number;
}
const WIDGETS: ErrorFamily = {
  name: 'widgets',
  prefix: WIDGETS_PREFIX,
  render: familyRenderer<WidgetsBody>({
    unavailable: (error) => ({ problem: error.message, status: 503 }),
    body: (r) => ({ problem: r.message, status: r.status }),
  }),
};

async function widgets(app: FastifyInstance) {
  await app.register(
    async (family) => {
      serveErrorFamily(family, WIDGETS);
      family.get('/things/:id', { config: { public: true } }, async () => {
        throw new NotFoundError('No such thing');
      });
      family.post('/things', { config: { public: true } }, async () => ({ ok: true }));
    },
    { prefix: '/widgets/v1' },
  );
}

// Writes `text` on a fresh connection and returns what the server wrote before closing it.
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', () => resolve(received));
    socket.write(text);
  });
}

describe('answers by URL', () => {
  const t = useTestApp({ routes: widgets });

  it("a family registered by a plugin of its own renders its routes' errors and the answers to its URLs before routing", async () => {
    const notFound = await t.app.inject({ url: '/widgets/v1/things/t1' });
    expect({ status: notFound.statusCode, body: notFound.json() }).toEqual({ status: 404, body: { problem: 'No such thing', status: 404 } });

    const wrongMethod = await t.app.inject({ method: 'DELETE', url: '/widgets/v1/things/t1' });
    expect(wrongMethod.statusCode).toBe(405);
    expect(wrongMethod.headers.allow).toBe('GET, HEAD');
    expect(wrongMethod.json()).toEqual({ problem: 'Method DELETE is not allowed here; allowed: GET, HEAD', status: 405 });

    // Fastify's framework errors, under a version no route serves
    const undecodable = await t.app.inject({ url: '/widgets/v9/%E0%A4%A' });
    expect({ status: undecodable.statusCode, body: undecodable.json() }).toEqual({ status: 400, body: { problem: expect.any(String), status: 400 } });

    // An unknown route is `{ message }` in every family.
    const unknown = await t.app.inject({ url: '/widgets/v9/things' });
    expect({ status: unknown.statusCode, body: unknown.json() }).toEqual({ status: 404, body: { message: 'Route GET /widgets/v9/things not found' } });
  });

  it("a body that breaks HTTP after the URL arrived is answered on the socket in the URL's family shape", async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    const text = await rawExchange(port, 'POST /widgets/v1/things HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
    const [head, body] = text.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(head).toContain('connection: close');
    expect(JSON.parse(body!)).toEqual({ problem: 'Malformed HTTP request', status: 400 });
  });

  it("each API family's prefix holds URLs no route serves; a URL under no prefix is `{ message }`", async () => {
    const cases = [
      { url: '/payments/v2/%E0%A4%A', body: { success: false, error: { name: 'ZodError', issues: [{ code: 'custom', message: "'/payments/v2/%E0%A4%A' is not a valid url component", path: [] }] } } },
      { url: '/asset-management/v9/%E0%A4%A', body: { type: 'BAD_REQUEST', code: 'INVALID_REQUEST_PARAMETERS', message: "'/asset-management/v9/%E0%A4%A' is not a valid url component" } },
      { url: '/oauth/other/%E0%A4%A', body: { error: 'invalid_request', error_description: "'/oauth/other/%E0%A4%A' is not a valid url component" } },
      // the prefix is a path: its name without the slash is not under it
      { url: '/payments%E0%A4%A', body: { message: "'/payments%E0%A4%A' is not a valid url component" } },
      { url: '/nothing/%E0%A4%A', body: { message: "'/nothing/%E0%A4%A' is not a valid url component" } },
    ];
    for (const c of cases) {
      const res = await t.app.inject({ url: c.url });
      expect({ status: res.statusCode, body: res.json() }, c.url).toEqual({ status: 400, body: c.body });
    }
  });

  it('each family answers with the body its table names for the status', async () => {
    const admin = t.bearer({ scopes: ['read:sessionpayment', 'read:asset', 'write:asset'], admin: true });
    const noScope = t.bearer({ scopes: ['read:chargingstationmodel'] });
    const cases: { table: ErrorTable; method: 'GET' | 'POST' | 'DELETE'; url: string; authorization?: string; payload?: string; status: number }[] = [
      { table: PAYMENTS_ERRORS, method: 'GET', url: '/payments/v1/session-payments', authorization: admin, status: 400 },
      { table: PAYMENTS_ERRORS, method: 'GET', url: '/payments/v1/session-payments?sessionIds=a', status: 401 },
      { table: PAYMENTS_ERRORS, method: 'GET', url: '/payments/v1/session-payments?sessionIds=a', authorization: noScope, status: 403 },
      { table: PAYMENTS_ERRORS, method: 'GET', url: '/payments/v1/session-payments/pmt_none', authorization: admin, status: 404 },
      { table: PAYMENTS_ERRORS, method: 'DELETE', url: '/payments/v1/session-payments', status: 405 },
      { table: ASSET_MANAGEMENT_ERRORS, method: 'POST', url: '/asset-management/v1/assets', authorization: admin, payload: '{}', status: 400 },
      { table: ASSET_MANAGEMENT_ERRORS, method: 'GET', url: '/asset-management/v1/assets', status: 401 },
      { table: ASSET_MANAGEMENT_ERRORS, method: 'GET', url: '/asset-management/v1/assets', authorization: noScope, status: 403 },
      { table: ASSET_MANAGEMENT_ERRORS, method: 'GET', url: '/asset-management/v1/assets/none', authorization: admin, status: 404 },
      { table: ASSET_MANAGEMENT_ERRORS, method: 'DELETE', url: '/asset-management/v1/assets', status: 405 },
      { table: OAUTH_ERRORS, method: 'POST', url: '/oauth/token', payload: 'grant_type=password', status: 400 },
      { table: OAUTH_ERRORS, method: 'POST', url: '/oauth/token', payload: 'grant_type=client_credentials&client_id=nobody&client_secret=wrong', status: 401 },
      { table: OAUTH_ERRORS, method: 'GET', url: '/oauth/token', status: 405 },
    ];
    for (const c of cases) {
      const headers: Record<string, string> = c.authorization ? { authorization: c.authorization } : {};
      if (c.payload !== undefined) headers['content-type'] = c.payload.startsWith('{') ? 'application/json' : 'application/x-www-form-urlencoded';
      const res = await t.app.inject({ method: c.method, url: c.url, headers, ...(c.payload === undefined ? {} : { payload: c.payload }) });
      const where = `${c.method} ${c.url}`;
      expect(res.statusCode, where).toBe(c.status);
      const answer = c.table[c.status];
      expect(answer, where).toBeDefined();
      const parsed = answer!.body.strict().safeParse(res.json());
      expect(parsed.error?.issues, `${where}: ${res.body}`).toBeUndefined();
    }
  });
});

describe('with an external identity provider', () => {
  it('answers under /oauth/ keep the OAuth 2.0 bodies although no route serves them', async () => {
    const external = await createTestApp({ env: { AUTH_JWKS_URL: 'https://tenant.example.com/.well-known/jwks.json', AUTH_ISSUER: 'https://tenant.example.com' } });
    try {
      const res = await external.app.inject({ method: 'POST', url: '/oauth/token/%E0%A4%A' });
      expect(res.statusCode).toBe(400);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.json()).toEqual({ error: 'invalid_request', error_description: "'/oauth/token/%E0%A4%A' is not a valid url component" });
    } finally {
      await external.close();
    }
  });
});
