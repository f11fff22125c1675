import { sql } from 'drizzle-orm';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { describe, expect, it } from 'vitest';
import { databaseErrorClass } from '../../src/db/failures.js';
import { BadRequestError, ServiceUnavailableError, ShuttingDownError } from '../../src/kernel/errors.js';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp } from '../helpers/probe-app.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { createTestDatabase } from '../helpers/test-database.js';

// What operators read: the request log line names the caller, /metrics counts database errors,
// shows the pool, and keeps its series bounded.

function metric(body: string, name: string, labels = ''): number | undefined {
  const escaped = `${name}${labels}`.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(body);
  return match ? Number(match[1]) : undefined;
}

async function scrape(t: TestApp): Promise<string> {
  const res = await t.app.inject({ url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return res.body;
}

// Scrapes until `seen` holds of one (at most 100, 10 ms apart), and answers the last scrape.
async function scrapeUntil(t: TestApp, seen: (text: string) => boolean): Promise<string> {
  let text = await scrape(t);
  for (let i = 0; i < 100 && !seen(text); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    text = await scrape(t);
  }
  return text;
}

const errors = (body: string, c: string) => metric(body, 'database_errors_total', `{class="${c}"}`);

describe('the request log line', () => {
  it('carries the verified token’s client id and network, never the token; nothing without one', async () => {
    const t = await createProbeApp({ captureLogs: true });
    try {
      const scoped = t.bearer({ scopes: ['read:sessionpayment'], network: 'net_log', clientId: 'cli_logged' });
      const everywhere = t.bearer({ scopes: ['write:chargingstationmodel'], admin: true, clientId: 'cli_admin' });
      const forged = `${scoped.slice(0, -6)}AAAAAA`;
      const requests = [
        { id: 'log-scoped', url: PAYMENTS_PROBE, authorization: scoped },
        { id: 'log-everywhere', url: ASSETS_PROBE, authorization: everywhere },
        { id: 'log-anonymous', url: PAYMENTS_PROBE, authorization: undefined },
        { id: 'log-forged', url: PAYMENTS_PROBE, authorization: forged },
        { id: 'log-public', url: '/.well-known/jwks.json', authorization: scoped },
      ];
      for (const r of requests) {
        await t.app.inject({ url: r.url, headers: { 'x-request-id': r.id, ...(r.authorization ? { authorization: r.authorization } : {}) } });
      }
      const lines = t
        .logLines()
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'request completed');
      const line = (id: string) => lines.find((l) => l.reqId === id)!;
      expect(line('log-scoped')).toMatchObject({ statusCode: 200, clientId: 'cli_logged', network: 'net_log' });
      // a token for every network: network is null
      expect(line('log-everywhere')).toMatchObject({ statusCode: 200, clientId: 'cli_admin', network: null });
      for (const id of ['log-anonymous', 'log-forged', 'log-public']) {
        expect(line(id)).toBeDefined();
        expect(line(id)).not.toHaveProperty('clientId');
        expect(line(id)).not.toHaveProperty('network');
      }
      const log = t.logLines().join('\n');
      for (const token of [scoped, everywhere, forged]) expect(log).not.toContain(token.slice('Bearer '.length));
    } finally {
      await t.close();
    }
  });
});

describe('the request log line of a request refused by the rate limiter', () => {
  it('names the client whose budget is spent, and no one for an address', async () => {
    const t = await createProbeApp({ captureLogs: true, env: { RATE_LIMIT_MAX: '1' } });
    try {
      const authorization = t.bearer({ scopes: ['read:sessionpayment'], network: 'net_busy', clientId: 'cli_busy' });
      for (const id of ['busy-1', 'busy-2']) await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization, 'x-request-id': id } });
      for (const id of ['anon-1', 'anon-2']) await t.app.inject({ url: PAYMENTS_PROBE, headers: { 'x-request-id': id } });
      const lines = t
        .logLines()
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'request completed');
      const line = (id: string) => lines.find((l) => l.reqId === id)!;
      expect(line('busy-1')).toMatchObject({ statusCode: 200, clientId: 'cli_busy', network: 'net_busy' });
      expect(line('busy-2')).toMatchObject({ statusCode: 429, clientId: 'cli_busy', network: 'net_busy' });
      expect(line('anon-1')).toMatchObject({ statusCode: 401 });
      expect(line('anon-2')).toMatchObject({ statusCode: 429 });
      for (const id of ['anon-1', 'anon-2']) expect(line(id)).not.toHaveProperty('clientId');
    } finally {
      await t.close();
    }
  });
});

describe('/metrics', () => {
  it('counts database errors by class: a refused statement is "other", a closed database "unavailable"', async () => {
    const database = await createTestDatabase();
    const t = await createTestApp({
      database,
      routes: (app) => {
        app.get('/payments/v1/_bad-statement', { config: { public: true } }, async () => {
          await app.database.db.execute(sql`select 'x'::int`);
          return {};
        });
      },
    });
    try {
      const before = await scrape(t);
      for (const c of ['timeout', 'unavailable', 'other']) expect(errors(before, c), c).toBe(0);

      expect((await t.app.inject({ url: '/payments/v1/_bad-statement' })).statusCode).toBe(500);
      const afterBad = await scrape(t);
      expect(errors(afterBad, 'other')).toBe(1);
      expect(errors(afterBad, 'unavailable')).toBe(0);

      // requests that fail without the database are not database errors
      expect((await t.app.inject({ url: PAYMENTS_PROBE })).statusCode).toBe(404);
      expect((await t.app.inject({ url: '/payments/v1/session-payments?sessionIds=a', headers: { authorization: t.bearer({ scopes: [] }) } })).statusCode).toBe(403);

      await database.close();
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(503);
      const list = await t.app.inject({ url: '/payments/v1/session-payments?sessionIds=a', headers: { authorization: t.bearer({ scopes: ['read:sessionpayment'] }) } });
      expect(list.statusCode).toBe(503);
      const afterClose = await scrape(t);
      expect(errors(afterClose, 'unavailable')).toBe(2);
      expect(errors(afterClose, 'other')).toBe(1);
      expect(errors(afterClose, 'timeout')).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('labels requests with their route pattern: one series for the reference page’s assets, one for every unmatched URL', async () => {
    const t = await createTestApp();
    try {
      const assets = ['/docs/static/index.css', '/docs/static/swagger-ui.css', '/docs/static/swagger-initializer.js', '/docs/static/swagger-ui-bundle.js'];
      for (const url of assets) expect((await t.app.inject({ url })).statusCode, url).toBe(200);
      for (const url of ['/docs/static/no-such-file.css', '/random/1', '/random/2?x=1']) await t.app.inject({ url });
      const body = await scrape(t);
      const routes = new Set([...body.matchAll(/route="([^"]*)"/g)].map((m) => m[1]));
      expect(routes).toContain('/docs/static/*');
      expect(routes).toContain('unmatched');
      expect([...routes].filter((route) => route!.startsWith('/docs/static/'))).toEqual(['/docs/static/*']);
      for (const route of routes) expect(route).not.toMatch(/random|no-such-file|\?/);
    } finally {
      await t.close();
    }
  });

  it('reports pool gauges for a PostgreSQL pool only: the embedded database has one connection and no pool', async () => {
    const t = await createTestApp();
    try {
      const body = await scrape(t);
      if (t.database.kind === 'pglite') expect(body).not.toContain('database_pool_');
      else expect(metric(body, 'database_pool_connections')).toBeGreaterThanOrEqual(0);
    } finally {
      await t.close();
    }
  });
});

describe('databaseErrorClass', () => {
  const pg = (code: string) => Object.assign(new Error(`pg ${code}`), { code });
  const wrapped = (cause: unknown) => new DrizzleQueryError('select 1', [], cause as Error);

  it('tells timeouts, unavailability and refused statements apart through drizzle’s wrapper', () => {
    expect(databaseErrorClass(wrapped(pg('57014')))).toBe('timeout');
    expect(databaseErrorClass(new Error('timeout exceeded when trying to connect'))).toBe('timeout');
    expect(databaseErrorClass(wrapped(new Error('Query read timeout')))).toBe('timeout');
    expect(databaseErrorClass(new ServiceUnavailableError('The database did not answer within 1500 ms', { timedOut: true }))).toBe('timeout');
    for (const code of ['57P01', '08006', '53300', '40001', 'ECONNREFUSED']) expect(databaseErrorClass(wrapped(pg(code))), code).toBe('unavailable');
    expect(databaseErrorClass(new Error('PGlite is closed'))).toBe('unavailable');
    for (const code of ['22P02', '23505', '42P01']) expect(databaseErrorClass(wrapped(pg(code))), code).toBe('other');
    expect(databaseErrorClass(wrapped(new Error('no code')))).toBe('other');
  });

  it('counts nothing that is not the database’s', () => {
    for (const error of [new ShuttingDownError(), new BadRequestError('bad'), new Error('boom'), null, 'text', { statusCode: 400 }]) {
      expect(databaseErrorClass(error)).toBeNull();
    }
  });
});

// Registered only with a PostgreSQL server: the pool and the statement timeout are its own.
const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('/metrics on PostgreSQL', () => {
  it('shows the request pool: open, idle and waiting, and counts a statement timeout as "timeout" (PostgreSQL)', async () => {
    const t = await createTestApp({
      env: { DATABASE_POOL_MAX: '1', DATABASE_STATEMENT_TIMEOUT_MS: '1000' },
      routes: (app) => {
        app.get('/payments/v1/_slow', { config: { public: true } }, async (request) => {
          const seconds = Number((request.query as { s?: string }).s ?? '0.5');
          await app.database.db.execute(sql`select pg_sleep(${seconds})`);
          return {};
        });
      },
    });
    try {
      // The delivery worker's polls and the scrape's own backlog query take the one connection
      // for moments of their own: look until a scrape sees it free (a guard of 100 scrapes, not a
      // speed check).
      const quiet = (text: string) => metric(text, 'database_pool_waiting_requests') === 0 && metric(text, 'database_pool_idle_connections') === metric(text, 'database_pool_connections');
      const idle = await scrapeUntil(t, quiet);
      expect(metric(idle, 'database_pool_waiting_requests')).toBe(0);
      expect(metric(idle, 'database_pool_connections')).toBeLessThanOrEqual(1);

      // one connection, held by the first sleeper: the second waits for it
      const sleepers = [t.app.inject({ url: '/payments/v1/_slow?s=0.8' }), t.app.inject({ url: '/payments/v1/_slow?s=0.1' })];
      const busy = await scrapeUntil(t, (text) => metric(text, 'database_pool_waiting_requests') === 1);
      expect(metric(busy, 'database_pool_waiting_requests')).toBe(1);
      expect(metric(busy, 'database_pool_connections')).toBe(1);
      expect(metric(busy, 'database_pool_idle_connections')).toBe(0);
      expect((await Promise.all(sleepers)).map((r) => r.statusCode)).toEqual([200, 200]);

      // The connection goes back to idle.
      const after = await scrapeUntil(t, quiet);
      expect(metric(after, 'database_pool_waiting_requests')).toBe(0);
      expect(metric(after, 'database_pool_idle_connections')).toBe(metric(after, 'database_pool_connections'));

      // past the statement timeout: a 503, counted as a timeout
      expect((await t.app.inject({ url: '/payments/v1/_slow?s=3' })).statusCode).toBe(503);
      const timedOut = await scrape(t);
      expect(errors(timedOut, 'timeout')).toBe(1);
      expect(errors(timedOut, 'unavailable')).toBe(0);
    } finally {
      await t.close();
    }
  });
});
