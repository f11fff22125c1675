// Database time limits and unavailability (docs/api.md, "When something fails"): statement timeout, pool acquisition
// timeout, readiness that answers within 2 s, start-up that may wait for the migration lock.
import { setTimeout as sleep } from 'node:timers/promises';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/kernel/config.js';
import { STARTUP_LOCK_KEY } from '../../src/db/startup-lock.js';
import { ASSET_WRITER, createAsset } from '../helpers/asset-factory.js';
import { oneUrl, reader } from '../helpers/payments-factory.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { createTestDatabase, otherSession, waitForLockWaiters } from '../helpers/test-database.js';

const CHANGE_PASSWORD = '/asset-management/v1/assets/change-password';
const PAYMENTS_503 = { code: 'SERVICE_UNAVAILABLE', message: expect.any(String), status: 503 };
const ASSETS_503 = { type: 'SERVICE_UNAVAILABLE', code: 'DATABASE_UNAVAILABLE', message: expect.any(String) };

function expect503(res: LightMyRequestResponse, body: Record<string, unknown>) {
  expect(res.statusCode, res.body).toBe(503);
  expect(res.json()).toEqual(body);
  expect(Object.keys(res.json() as object).sort()).toEqual(Object.keys(body).sort());
  expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
}

// The readiness answer, or 'no answer' when it takes longer than the 2 s a readiness check may take.
async function readinessWithin2s(t: TestApp): Promise<number | 'no answer'> {
  const timer = sleep(2000, 'no answer' as const);
  return Promise.race([t.app.inject({ url: '/readyz' }).then((res) => res.statusCode), timer]);
}

describe('configuration', () => {
  it('defaults both database time limits to 5000 ms', () => {
    expect(loadConfig({}).database).toMatchObject({ statementTimeoutMs: 5000, acquireTimeoutMs: 5000 });
  });

  it('reads them from DATABASE_STATEMENT_TIMEOUT_MS and DATABASE_ACQUIRE_TIMEOUT_MS', () => {
    const config = loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '250', DATABASE_ACQUIRE_TIMEOUT_MS: '30000' });
    expect(config.database).toMatchObject({ statementTimeoutMs: 250, acquireTimeoutMs: 30_000 });
  });

  it.each(['0', '99', '1.5', 'soon', '-1'])('refuses %j, naming the variable', (value) => {
    for (const variable of ['DATABASE_STATEMENT_TIMEOUT_MS', 'DATABASE_ACQUIRE_TIMEOUT_MS']) {
      expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^invalid configuration: ${variable}: `));
    }
  });
});

describe('a database that stops answering', () => {
  it('answers 503 with Retry-After in each family, RFC 6749 temporarily_unavailable at the token endpoint', async () => {
    const database = await createTestDatabase();
    const t = await createTestApp({ database });
    try {
      const asset = await createAsset(t);
      await database.close();

      expect503(await t.app.inject({ url: oneUrl('pmt_gone'), headers: { authorization: reader(t) } }), PAYMENTS_503);
      expect503(
        await t.app.inject({ url: `/asset-management/v1/assets/${asset.id}`, headers: { authorization: t.bearer(ASSET_WRITER) } }),
        ASSETS_503,
      );
      expect503(
        await t.app.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: {
            authorization: `Basic ${Buffer.from('cli_someone:some-secret').toString('base64')}`,
            'content-type': 'application/x-www-form-urlencoded',
          },
          payload: 'grant_type=client_credentials',
        }),
        { error: 'temporarily_unavailable', error_description: expect.any(String) },
      );
      expect503(await t.app.inject({ url: '/.well-known/jwks.json' }), { message: expect.any(String) });
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(503);
    } finally {
      await t.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// PostgreSQL: other sessions holding locks.

// Registered only with a PostgreSQL server: these need other sessions, locks and terminated backends.
const onServer = process.env.DATABASE_URL ? describe : undefined;


onServer?.('a row locked by another session (PostgreSQL)', () => {
  it('change-password answers 503 after the statement timeout, /readyz answers meanwhile, and it works once the lock is gone (PostgreSQL)', async () => {
    const t = await createTestApp({ env: { DATABASE_STATEMENT_TIMEOUT_MS: '300' }, captureLogs: true });
    const holder = await otherSession(t.database);
    try {
      const asset = await createAsset(t);
      await holder.query('begin');
      await holder.query('select id from assets where id = $1 for update', [asset.id]);

      const change = t.app.inject({ method: 'POST', url: CHANGE_PASSWORD, headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: asset.id } });
      expect(await readinessWithin2s(t)).toBe(200);
      expect503(await change, ASSETS_503);
      // Logged with the driver's SQLSTATE, without the failed query's parameters (the new hash).
      const logged = t.logLines().filter((line) => line.includes('service unavailable'));
      expect(logged.length).toBe(1);
      expect(JSON.parse(logged[0]!)).toMatchObject({ level: 40, err: { code: '57014' } });
      expect(t.logLines().filter((line) => /(?:hmac-sha256|argon2id|scrypt)\$/.test(line) || line.includes('Failed query'))).toEqual([]);

      await holder.query('rollback');
      const after = await t.app.inject({ method: 'POST', url: CHANGE_PASSWORD, headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: asset.id } });
      expect(after.statusCode, after.body).toBe(200);
    } finally {
      await holder.end();
      await t.close();
    }
  });

  it('with its only pooled connection stuck behind the lock, other requests get 503 after the acquire timeout and /readyz still answers (PostgreSQL)', async () => {
    const t = await createTestApp({ env: { DATABASE_POOL_MAX: '1', DATABASE_ACQUIRE_TIMEOUT_MS: '300', DATABASE_STATEMENT_TIMEOUT_MS: '20000' } });
    const holder = await otherSession(t.database);
    const watcher = await otherSession(t.database);
    try {
      const asset = await createAsset(t);
      await holder.query('begin');
      await holder.query('select id from assets where id = $1 for update', [asset.id]);

      const stuck = t.app.inject({ method: 'POST', url: CHANGE_PASSWORD, headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: asset.id } });
      await waitForLockWaiters(watcher, 1);

      expect503(await t.app.inject({ url: `/asset-management/v1/assets/${asset.id}`, headers: { authorization: t.bearer(ASSET_WRITER) } }), ASSETS_503);
      expect503(await t.app.inject({ url: oneUrl('pmt_any'), headers: { authorization: reader(t) } }), PAYMENTS_503);
      expect(await readinessWithin2s(t)).toBe(200);

      // The stuck request only waited: it completes once the lock is released.
      await holder.query('rollback');
      const done = await stuck;
      expect(done.statusCode, done.body).toBe(200);
    } finally {
      await holder.end();
      await watcher.end();
      await t.close();
    }
  });
});

onServer?.('start-up (PostgreSQL)', () => {
  it('waits for the migration lock longer than the statement timeout, which then bounds requests (PostgreSQL)', async () => {
    const database = await createTestDatabase({ statementTimeoutMs: 300 });
    const holder = await otherSession(database);
    const watcher = await otherSession(database);
    let t: TestApp | undefined;
    try {
      // Another replica migrating: it holds the start-up lock.
      await holder.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
      const starting = createTestApp({ database, env: { DATABASE_STATEMENT_TIMEOUT_MS: '300' } });
      await waitForLockWaiters(watcher, 1, 900);
      await holder.query('select pg_advisory_unlock($1)', [STARTUP_LOCK_KEY]);
      t = await starting;

      const asset = await createAsset(t);
      await holder.query('begin');
      await holder.query('select id from assets where id = $1 for update', [asset.id]);
      const res = await t.app.inject({ method: 'POST', url: CHANGE_PASSWORD, headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: asset.id } });
      expect503(res, ASSETS_503);
      await holder.query('rollback');
    } finally {
      await holder.end();
      await watcher.end();
      await t?.close();
      await database.close();
    }
  });
});
