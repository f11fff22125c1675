import { createServer, Socket, type Server } from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/auth/clients-service.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { classifyDatabaseError, databaseErrorClass, NETWORK_FAILURE_CODES } from '../../src/db/failures.js';
import { LIST_URL, reader } from '../helpers/payments-factory.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { createServerDatabase, createTestDatabase, databaseUrlOf } from '../helpers/test-database.js';

// What drizzle hands the service: its own error, with the driver's error as `cause`.
function wrapped(driverError: unknown): Error {
  return new Error('Failed query: update "assets" set ...', { cause: driverError });
}

describe('a network failure to reach the database is "unavailable, retry"', () => {
  it('the list holds every network failure, name resolution included', () => {
    expect(NETWORK_FAILURE_CODES).toEqual(
      expect.arrayContaining(['ENOTFOUND', 'EAI_AGAIN', 'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EPIPE']),
    );
  });

  // As Node reports them: from the resolver, from connect (an AggregateError when a name has
  // several addresses and every one failed), or from a socket that was open; bare, or wrapped by
  // drizzle once or twice.
  function networkErrors(code: string): unknown[] {
    const errors = [
      Object.assign(new Error(`getaddrinfo ${code} db`), { code, errno: -3008, syscall: 'getaddrinfo', hostname: 'db' }),
      Object.assign(new Error(`connect ${code} 10.0.0.7:5432`), { code, errno: -111, syscall: 'connect', address: '10.0.0.7', port: 5432 }),
      Object.assign(new AggregateError([Object.assign(new Error(`connect ${code} ::1:5432`), { code })], ''), { code }),
      Object.assign(new Error(`read ${code}`), { code, errno: -104, syscall: 'read' }),
    ];
    return errors.flatMap((e) => [e, new DrizzleQueryError('select 1', [], e), wrapped(new DrizzleQueryError('select 1', [], e))]);
  }

  it.each(NETWORK_FAILURE_CODES)('network failure %s is 503 DATABASE_UNAVAILABLE, counted as "unavailable"', (code) => {
    for (const error of networkErrors(code)) {
      expect(classifyDatabaseError(error)).toMatchObject({ kind: 'service_unavailable', code: 'DATABASE_UNAVAILABLE', retryAfterSeconds: 1 });
      expect(databaseErrorClass(error)).toBe('unavailable');
    }
  });

  it('a Unix socket with nobody behind it is 503; a missing file elsewhere is not', () => {
    const noSocket = Object.assign(new Error('connect ENOENT /var/run/postgresql/.s.PGSQL.5432'), { code: 'ENOENT', syscall: 'connect' });
    expect(databaseErrorClass(new DrizzleQueryError('select 1', [], noSocket))).toBe('unavailable');
    const noFile = Object.assign(new Error("ENOENT: no such file or directory, open 'x'"), { code: 'ENOENT', syscall: 'open' });
    expect(classifyDatabaseError(noFile)).toBeNull();
  });

  it('no other code is a network failure', () => {
    const sqlstateLike = /^[0-9A-Z]{5}$/;
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.constantFrom('ENOENT', 'EACCES', 'EEXIST', 'EMFILE', 'ERR_INVALID_ARG_TYPE', 'ECONNREFUSEDX')), (code) => {
        fc.pre(!NETWORK_FAILURE_CODES.includes(code) && !sqlstateLike.test(code));
        const error = Object.assign(new Error('failed'), { code, syscall: 'read' });
        expect(classifyDatabaseError(error)).toBeNull();
        expect(classifyDatabaseError(wrapped(error))).toBeNull();
      }),
    );
  });

  // pg and pg-pool say these in words, without a code: a connection cut, or not made in time.
  it.each([
    ['Connection terminated unexpectedly', 'unavailable'],
    ['Connection terminated due to connection timeout', 'unavailable'],
    ['timeout exceeded when trying to connect', 'timeout'],
  ])('"%s" is 503, counted as "%s"', (message, counted) => {
    const error = new DrizzleQueryError('select 1', [], new Error(message));
    expect(classifyDatabaseError(error)).toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    expect(databaseErrorClass(error)).toBe(counted);
  });
});

// The service's own limits (their defaults), as the running service would pass them.
const LIMITS = { statementTimeoutMs: 5000, acquireTimeoutMs: 5000 };
const ASSET_URL = '/asset-management/v1/assets/CP-unreachable-1';

// A service that started against its database (migrated it, made its signing key, read its keys)
// and whose database can no longer be reached afterwards at `url`: the host name stopped
// resolving, or nobody listens there. Every use of the database after start-up goes to `url`.
async function appWhoseDatabaseMovedTo(rewrite: (url: URL) => void): Promise<{ t: TestApp; close(): Promise<void> }> {
  const started = await createTestDatabase(LIMITS);
  const url = new URL(databaseUrlOf(started));
  rewrite(url);
  const unreachable = await openDatabase({ url: url.toString(), ...LIMITS });
  let current = started;
  const db = new Proxy({} as Database['db'], {
    get(_target, property) {
      const value = Reflect.get(current.db, property) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(current.db) : value;
    },
  });
  const database: Database = { ...started, db, ping: () => current.ping() };
  const t = await createTestApp({ database });
  current = unreachable;
  return {
    t,
    async close() {
      await t.close();
      await unreachable.close();
      await started.close();
    },
  };
}

function tokenRequest(t: TestApp, clientId = 'cli_unknown', clientSecret = 'secret') {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    payload: 'grant_type=client_credentials',
  });
}

function errorsCounted(metrics: string, c: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`database_errors_total{class="${c}"}`));
  return Number(line?.split(' ')[1]);
}

// Every API a client meets answers the 503 of an unavailable database in its own family's shape,
// with Retry-After, from the first request on.
async function expectUnavailableEverywhere(t: TestApp) {
  const list = await t.app.inject({ url: `${LIST_URL}?sessionIds=ses_unreachable_1`, headers: { authorization: reader(t) } });
  expect(list.statusCode, list.body).toBe(503);
  expect(list.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), status: 503 });
  expect(Number(list.headers['retry-after'])).toBeGreaterThan(0);

  const asset = await t.app.inject({ url: ASSET_URL, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(asset.statusCode, asset.body).toBe(503);
  expect(asset.json()).toEqual({ type: 'SERVICE_UNAVAILABLE', code: 'DATABASE_UNAVAILABLE', message: expect.any(String) });
  expect(Number(asset.headers['retry-after'])).toBeGreaterThan(0);

  const token = await tokenRequest(t);
  expect(token.statusCode, token.body).toBe(503);
  expect(token.json()).toEqual({ error: 'temporarily_unavailable', error_description: expect.any(String) });
  expect(Number(token.headers['retry-after'])).toBeGreaterThan(0);
  expect(token.headers['cache-control']).toBe('no-store');

  const ready = await t.app.inject({ url: '/readyz' });
  expect(ready.statusCode, ready.body).toBe(503);
}

async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

// Registered only with a PostgreSQL server: PGlite runs in the process and cannot be unreachable.
const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('a database that cannot be reached (PostgreSQL)', () => {
  let current: { t: TestApp; close(): Promise<void> } | undefined;
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });

  it('a host name that does not resolve is the 503 of each family, counted as "unavailable" (PostgreSQL)', async () => {
    current = await appWhoseDatabaseMovedTo((url) => {
      url.hostname = 'db.invalid';
    });
    await expectUnavailableEverywhere(current.t);
    const metrics = (await current.t.app.inject({ url: '/metrics' })).body;
    // list, asset read, token request and readiness
    expect(errorsCounted(metrics, 'unavailable')).toBeGreaterThanOrEqual(4);
    expect(errorsCounted(metrics, 'other')).toBe(0);
  });

  it('a port nobody listens on is the 503 of each family (PostgreSQL)', async () => {
    const port = await closedPort();
    current = await appWhoseDatabaseMovedTo((url) => {
      url.hostname = '127.0.0.1';
      url.port = String(port);
    });
    await expectUnavailableEverywhere(current.t);
  });
});

// A TCP relay in front of the real PostgreSQL that can stop (its port then refuses, and every
// relayed connection is cut) and start again on the same port.
class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = new Socket();
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => [client, upstream].forEach((x) => x.destroy()));
      }
      upstream.connect(this.target.port, this.target.host);
      client.pipe(upstream).pipe(client);
    });
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = once(server, 'close');
    server.close();
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

onServer?.('the database coming back (PostgreSQL)', () => {
  let proxy: TcpProxy;
  let t: TestApp;
  let database: Database;
  let dropDatabase: () => Promise<void>;
  let client: { clientId: string; clientSecret: string };

  beforeAll(async () => {
    const server = await createServerDatabase();
    dropDatabase = server.drop;
    const direct = new URL(server.url);
    proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
    await proxy.start();
    const relayed = new URL(server.url);
    relayed.hostname = '127.0.0.1';
    relayed.port = String(proxy.port);
    database = await openDatabase({ url: relayed.toString(), directUrl: server.directUrl, ...LIMITS });
    t = await createTestApp({ database });
    client = await createClient(database.db, { name: 'reader', scopes: ['read:sessionpayment', 'read:asset'] });
  });
  afterAll(async () => {
    await t?.close();
    await database?.close();
    await proxy?.start().catch(() => undefined);
    await proxy?.stop();
    await dropDatabase?.();
  });

  it('answers 503 while the database refuses, and 200 again within a few seconds of it answering (PostgreSQL)', async () => {
    const list = () => t.app.inject({ url: `${LIST_URL}?sessionIds=ses_back_1`, headers: { authorization: reader(t) } });
    expect((await list()).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);

    await proxy.stop();
    // The first request after the cut is already the 503, not a 500.
    await expectUnavailableEverywhere(t);
    for (let i = 0; i < 5; i++) expect((await list()).statusCode).toBe(503);

    await proxy.start();
    const back = Date.now();
    let answers: number[] = [];
    // The bound is "within a few seconds" (docs/api.md, "When something fails"), not a speed check.
    while (Date.now() - back < 5000) {
      const token = await tokenRequest(t, client.clientId, client.clientSecret);
      answers = [(await list()).statusCode, (await t.app.inject({ url: '/readyz' })).statusCode, token.statusCode];
      if (answers.every((s) => s === 200)) break;
      await sleep(100);
    }
    expect(answers).toEqual([200, 200, 200]);
  });
});
