import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyDatabaseError } from '../../src/db/failures.js';
import { ConflictError, ServiceUnavailableError, UnauthorizedError } from '../../src/kernel/errors.js';
import { paymentBody } from '../helpers/payments-factory.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';


// What drizzle hands the service: its own error, with the driver's error as `cause`.
function wrapped(driverError: Error): Error {
  return new Error('Failed query: update "assets" set ...', { cause: driverError });
}
function pgError(code: string, message = 'database error'): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR' });
}

describe('classifyDatabaseError', () => {
  it.each([
    ['57014', 'canceling statement due to statement timeout'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection due to crash of another server process'],
    ['57P03', 'the database system is starting up'],
    ['08006', 'connection failure'],
    ['08001', 'could not connect'],
    ['08003', 'connection does not exist'],
    ['53300', 'sorry, too many clients already'],
    ['40P01', 'deadlock detected'],
    ['40001', 'could not serialize access due to concurrent update'],
    ['55P03', 'could not obtain lock on row'],
  ])('SQLSTATE %s (%s) is "unavailable, retry": 503', (code, message) => {
    for (const error of [pgError(code, message), wrapped(pgError(code, message))]) {
      const classified = classifyDatabaseError(error);
      expect(classified).toBeInstanceOf(ServiceUnavailableError);
      expect(classified).toMatchObject({ kind: 'service_unavailable', code: 'DATABASE_UNAVAILABLE' });
      // The client-facing message never carries the query text or its parameters.
      expect(classified!.message).not.toMatch(/update|assets|Failed query/i);
    }
  });

  it.each([
    'timeout exceeded when trying to connect',
    'Connection terminated unexpectedly',
    'Connection terminated due to connection timeout',
    'Connection terminated',
    'Client has encountered a connection error and is not queryable',
    'Query read timeout',
    'Cannot use a pool after calling end on the pool',
  ])('pg error "%s" is 503', (message) => {
    expect(classifyDatabaseError(new Error(message))).toBeInstanceOf(ServiceUnavailableError);
    expect(classifyDatabaseError(wrapped(new Error(message)))).toBeInstanceOf(ServiceUnavailableError);
  });

  it.each([
    ['23505', 'duplicate key value violates unique constraint'],
    ['23503', 'insert or update violates foreign key constraint'],
    ['23514', 'new row violates check constraint'],
    ['22P02', 'invalid input syntax for type integer'],
    ['42P01', 'relation does not exist'],
    ['42703', 'column does not exist'],
  ])('a bug-class or constraint error (SQLSTATE %s) is left alone', (code, message) => {
    expect(classifyDatabaseError(pgError(code, message))).toBeNull();
    expect(classifyDatabaseError(wrapped(pgError(code, message)))).toBeNull();
  });

  it('leaves errors that are not the database alone', () => {
    for (const error of [new Error('boom'), new TypeError('x is undefined'), 'a string', null, undefined, { code: 42 }]) {
      expect(classifyDatabaseError(error)).toBeNull();
    }
  });

  it('leaves an error that already decided its answer alone, whatever its cause', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(classifyDatabaseError(new UnauthorizedError('key server unreachable', { cause: refused }))).toBeNull();
    expect(classifyDatabaseError(Object.assign(new ConflictError('taken'), { cause: pgError('40P01') }))).toBeNull();
    expect(classifyDatabaseError(Object.assign(new Error('Bad Request'), { statusCode: 400, cause: refused }))).toBeNull();
  });

  it('stops at a cause cycle', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(classifyDatabaseError(a)).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------
// A real service process on PostgreSQL whose backends are terminated while it works.

interface Answer {
  status: number;
  body: unknown;
  headers: Headers;
}

async function call(base: string, path: string, init: { method?: string; token?: string; body?: unknown; basic?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.basic) headers.authorization = `Basic ${init.basic}`;
  let body: string | undefined;
  if (typeof init.body === 'string') {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = init.body;
  } else if (init.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(init.body);
  }
  const res = await fetch(`${base}${path}`, { method: init.method ?? 'GET', headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text so the assertion shows it
  }
  return { status: res.status, body: parsed, headers: res.headers };
}


const PAYMENTS_5XX_KEYS = ['code', 'message', 'status'];
const ASSETS_5XX_KEYS = ['type', 'code', 'message'];

// Registered only with a PostgreSQL server: these need other sessions, locks and terminated backends.
const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('a lost database connection (PostgreSQL)', () => {
  let child: ChildProcess | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await killProcess(child);
    await dropDatabase?.();
  });

  it(
    'fails only the requests it hits, in their family shape; the process keeps serving and loses no answered payment (PostgreSQL)',
    async () => {
      const database = await createServerDatabase();
      dropDatabase = database.drop;
      const service = await startService({ LOG_LEVEL: 'error', ...database.env, DATABASE_POOL_MAX: '4' });
      const server = service.child;
      child = server;
      const { base } = service;
      const { token } = await bootstrapToken(service);

      const created = await call(base, '/asset-management/v1/assets', {
        method: 'POST',
        token,
        body: { id: 'CP-fault-1', network: 'net_fault' },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const assetId = (created.body as { data: { id: string } }).data.id;

      const answers: { family: 'payments' | 'asset-management'; answer: Answer }[] = [];
      const networkErrors: string[] = [];
      const recorded: { id: string; body: unknown }[] = [];
      let running = true;

      async function changePasswords() {
        while (running) {
          try {
            const answer = await call(base, '/asset-management/v1/assets/change-password', { method: 'POST', token, body: { id: assetId } });
            answers.push({ family: 'asset-management', answer });
          } catch (error) {
            networkErrors.push(String(error));
          }
        }
      }
      async function recordPayments() {
        while (running) {
          try {
            const answer = await call(base, '/payments/v1/session-payments', { method: 'POST', token, body: paymentBody({ network: 'net_fault' }) });
            answers.push({ family: 'payments', answer });
            if (answer.status === 201) recorded.push({ id: (answer.body as { id: string }).id, body: answer.body });
          } catch (error) {
            networkErrors.push(String(error));
          }
        }
      }

      const killer = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await killer.connect();
      let terminated = 0;
      try {
        const load = [changePasswords(), changePasswords(), recordPayments(), recordPayments()];
        const until = Date.now() + 3000;
        while (Date.now() < until) {
          await sleep(100);
          const { rows } = await killer.query<{ ok: boolean }>(
            'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
            [database.name],
          );
          terminated += rows.filter((r) => r.ok).length;
        }
        running = false;
        await Promise.all(load);
      } finally {
        await killer.end();
      }

      expect(terminated).toBeGreaterThan(0);
      expect({ exitCode: server.exitCode, signal: server.signalCode, networkErrors }).toEqual({ exitCode: null, signal: null, networkErrors: [] });
      expect(service.output.stderr).toBe('');

      for (const { family, answer } of answers) {
        expect([200, 201, 503, 500], JSON.stringify(answer.body)).toContain(answer.status);
        if (answer.status < 500) continue;
        const body = answer.body as Record<string, unknown>;
        if (family === 'payments') {
          expect(Object.keys(body).sort()).toEqual([...PAYMENTS_5XX_KEYS].sort());
          expect(body).toEqual({
            code: answer.status === 503 ? 'SERVICE_UNAVAILABLE' : 'INTERNAL_SERVER_ERROR',
            message: expect.any(String),
            status: answer.status,
          });
        } else {
          expect(Object.keys(body).sort()).toEqual([...ASSETS_5XX_KEYS].sort());
          expect(body).toEqual(
            answer.status === 503
              ? { type: 'SERVICE_UNAVAILABLE', code: 'DATABASE_UNAVAILABLE', message: expect.any(String) }
              : { type: 'INTERNAL_ERROR', code: 'INTERNAL_SERVER_ERROR', message: expect.any(String) },
          );
        }
        if (answer.status === 503) expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
      }

      // Ready again once the database answers; the bound is a safety net, not a speed check.
      let ready = 0;
      for (let i = 0; i < 200 && ready !== 200; i++) {
        ready = (await call(base, '/readyz')).status;
        if (ready !== 200) await sleep(100);
      }
      expect(ready).toBe(200);

      // Every payment answered 201 was committed, exactly as answered.
      for (const payment of recorded) {
        const read = await call(base, `/payments/v1/session-payments/${payment.id}`, { token });
        expect(read.status).toBe(200);
        expect(read.body).toEqual(payment.body);
      }
      // And the service still does its work.
      expect((await call(base, '/asset-management/v1/assets/change-password', { method: 'POST', token, body: { id: assetId } })).status).toBe(200);
      expect(server.exitCode).toBeNull();
    },
    90_000,
  );
});
