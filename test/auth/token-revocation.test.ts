import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, revokeClient, type CreatedClient } from '../../src/auth/clients-service.js';
import { createRevocationList } from '../../src/auth/revocation-list.js';
import { loadConfig } from '../../src/kernel/config.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { countingDb } from '../helpers/counting-db.js';
import { LIST_URL } from '../helpers/payments-factory.js';
import { PAYMENTS_PROBE, createProbeApp, expectPaymentsDatabaseUnavailable, type ProbeApp } from '../helpers/probe-app.js';
import { createTestApp, embeddedIssuerToken, type TestApp } from '../helpers/test-app.js';
import { createTestDatabase, databaseUrlOf } from '../helpers/test-database.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const LIST = `${LIST_URL}?sessionIds=ses_revocation_probe`;

const tokenFor = async (t: TestApp, c: CreatedClient) => `Bearer ${await embeddedIssuerToken(t.app, c)}`;

const list = (t: TestApp, authorization: string) => t.app.inject({ url: LIST, headers: { authorization } });

function expectPayments401(res: LightMyRequestResponse) {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toEqual({ message: expect.any(String) });
  expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
}


describe('revocation list (per-process cache of revoked clients)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  it('asks the database once per refresh interval, and sees a revocation once the interval has passed', async () => {
    const db = t.database.db;
    const doomed = await createClient(db, { name: 'doomed', scopes: ['read:sessionpayment'] });
    const kept = await createClient(db, { name: 'kept', scopes: ['read:sessionpayment'] });
    let clock = 1_000_000;
    const counting = countingDb(db);
    const list = createRevocationList({ db: counting.db, refreshSeconds: 10, now: () => clock });

    for (let i = 0; i < 50; i++) expect(await list.isRevoked(doomed.clientId)).toBe(false);
    expect(counting.counter.selects).toBe(1);

    expect(await revokeClient(db, doomed.clientId)).toBe(true);
    clock += 9_999;
    expect(await list.isRevoked(doomed.clientId)).toBe(false);
    expect(counting.counter.selects).toBe(1);

    clock += 1;
    expect(await list.isRevoked(doomed.clientId)).toBe(true);
    expect(await list.isRevoked(kept.clientId)).toBe(false);
    expect(counting.counter.selects).toBe(2);
  });

  it('shares one query among concurrent requests when the list is due', async () => {
    const counting = countingDb(t.database.db);
    const list = createRevocationList({ db: counting.db, refreshSeconds: 10 });
    await Promise.all(Array.from({ length: 20 }, () => list.isRevoked('cli_any')));
    expect(counting.counter.selects).toBe(1);
  });

  it('refreshes at most every 30 s: 10 s by default, and no setting above 30 s is accepted', () => {
    expect(loadConfig({}).auth.revocationRefreshSeconds).toBe(10);
    expect(loadConfig({ AUTH_REVOCATION_REFRESH_SECONDS: '30' }).auth.revocationRefreshSeconds).toBe(30);
    for (const value of ['31', '0', '-1', '1.5', 'soon']) {
      expect(() => loadConfig({ AUTH_REVOCATION_REFRESH_SECONDS: value })).toThrow(/^invalid configuration: AUTH_REVOCATION_REFRESH_SECONDS: /);
    }
  });
});

describe('tokens of a revoked client (embedded issuer)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { AUTH_REVOCATION_REFRESH_SECONDS: '1' } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('get 401 on the payments list within the refresh interval, even from the verified-token cache; other clients keep working', async () => {
    const db = t.database.db;
    const doomed = await createClient(db, { name: 'doomed', scopes: ['read:sessionpayment'] });
    const kept = await createClient(db, { name: 'kept', scopes: ['read:sessionpayment'] });
    const doomedToken = await tokenFor(t, doomed);
    const keptToken = await tokenFor(t, kept);
    // used once, so fast-jwt has it in its cache of verified tokens
    expect((await list(t, doomedToken)).statusCode).toBe(200);
    expect((await list(t, keptToken)).statusCode).toBe(200);

    // the CLI's code path (npm run cli -- clients revoke)
    expect(await revokeClient(db, doomed.clientId)).toBe(true);
    await sleep(1100);

    expectPayments401(await list(t, doomedToken));
    expect((await list(t, keptToken)).statusCode).toBe(200);
    // a token minted before the revocation but never used (not in the cache) is refused too
    expectPayments401(await list(t, t.bearer({ scopes: ['read:sessionpayment'], clientId: doomed.clientId })));
  });
});

describe('a database error while the revocation list refreshes', () => {
  it('is not a 401: the request fails as the database error it is, in the family shape', async () => {
    const database = await createTestDatabase();
    const t = await createProbeApp({ database, env: { AUTH_REVOCATION_REFRESH_SECONDS: '1' } });
    try {
      const authorization = t.bearer({ scopes: ['read:sessionpayment'] });
      expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } })).statusCode).toBe(200);
      await database.close();
      await sleep(1100);
      // the same token: its signature is cached and the keys are fresh, only the revocation list is due
      const res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } });
      expectPaymentsDatabaseUnavailable(res);
    } finally {
      await t.close();
    }
  });
});

// Two replicas on one database: a revocation through either reaches the other. Needs a server
// (PGlite is one process's database), so it exists only in the PostgreSQL run.
const onServer = process.env.DATABASE_URL ? describe : undefined;
onServer?.('(PostgreSQL) revocation across replicas', () => {
  let a: ProbeApp;
  let b: TestApp;
  let second: Database;
  beforeAll(async () => {
    a = await createProbeApp({ env: { AUTH_REVOCATION_REFRESH_SECONDS: '1' } });
    second = await openDatabase({ url: databaseUrlOf(a.database), poolMax: 2 });
    b = await createTestApp({ database: second, env: { AUTH_REVOCATION_REFRESH_SECONDS: '1' } });
  });
  afterAll(async () => {
    await b?.close();
    await second?.close();
    await a?.close();
  });

  it('(PostgreSQL) a client revoked through one database connection is refused by the other app within the interval', async () => {
    const doomed = await createClient(a.database.db, { name: 'doomed', scopes: ['read:sessionpayment'] });
    const token = await tokenFor(a, doomed);
    expect((await list(b, token)).statusCode).toBe(200);
    expect((await list(a, token)).statusCode).toBe(200);
    expect(await revokeClient(a.database.db, doomed.clientId)).toBe(true);
    await sleep(1100);
    expectPayments401(await list(b, token));
    expectPayments401(await list(a, token));
  });
});
