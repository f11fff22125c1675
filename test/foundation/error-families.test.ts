// The family registry: each API family registers its renderer under its own URL prefix, and every
// answer to a URL under that prefix takes the family's shapes, a URL no route serves included;
// a URL under no prefix is answered `{ message }`.
import { connect } from 'node:net';
import fc from 'fast-check';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../src/errors.js';
import { ErrorFamilies, serveErrorFamily, type ErrorFamily } from '../../src/plugins/errors/error-families.js';
import { familyRenderer, renderPlainError, type ErrorRenderer } from '../../src/plugins/errors/error-rendering.js';
import { createTestApp, useTestApp } from '../helpers/test-app.js';

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
