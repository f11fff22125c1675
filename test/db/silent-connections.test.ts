// The guard against a database that stops answering without closing the connection
// (src/db/silent-connections.ts): a query in flight that receives nothing for the statement
// timeout plus a second is failed with a 503, the process stays up, and the service answers again
// once the network carries bytes again; a query whose answer keeps arriving is never cut, however
// long it takes. With DATABASE_DIRECT_URL (the pooler pass) the proxy stands in front of the pooler.
// Runs only with DATABASE_URL (vitest.config.ts leaves it out otherwise: PGlite has no socket).
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { oneUrl } from '../helpers/payments-factory.js';
import { startFreezingProxy, type FreezingProxy } from '../helpers/freezing-proxy.js';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';
import { createServerDatabase, waitForLockWaiters } from '../helpers/test-database.js';

const STATEMENT_TIMEOUT_MS = 5000;
// the statement timeout and the margin the service adds (postgres-database.ts)
const GUARD_LIMIT_MS = STATEMENT_TIMEOUT_MS + 1000;

describe('a database that stops answering on an open connection (PostgreSQL)', () => {
  let child: ChildProcess | undefined;
  let proxy: FreezingProxy | undefined;
  const sessions: pg.Client[] = [];
  let dropDatabase: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await killProcess(child);
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await proxy?.close();
    await dropDatabase?.();
  });

  async function session(url: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    sessions.push(client);
    return client;
  }

  it(
    'a request whose query is in flight when the network freezes gets the 503 of the guard; /readyz answers 503 meanwhile; the process stays up and answers again once the network does (PostgreSQL)',
    async () => {
      const database = await createServerDatabase();
      dropDatabase = database.drop;
      proxy = await startFreezingProxy(database.url);
      const service = await startService({
        LOG_LEVEL: 'error',
        DATABASE_URL: proxy.url,
        ...(database.directUrl === undefined ? {} : { DATABASE_DIRECT_URL: database.directUrl }),
        DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
        // longer than the test: a 503 here can only come from the guard
        DATABASE_ACQUIRE_TIMEOUT_MS: '600000',
      });
      child = service.child;
      const { base } = service;
      const { token } = await bootstrapToken(service);
      const call = (path: string, init: RequestInit = {}) =>
        fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      const changePassword = (id: string) => call('/asset-management/v1/assets/change-password', { method: 'POST', body: JSON.stringify({ id }) });

      const created = await call('/asset-management/v1/assets', { method: 'POST', body: JSON.stringify({ id: 'CP-frozen-1', network: 'net_frozen' }) });
      expect(created.status, await created.clone().text()).toBe(201);
      const assetId = ((await created.json()) as { data: { id: string } }).data.id;

      // Another session (not through the proxy) locks the asset and the payments, so that two
      // requests' statements are in flight, waiting, when the network freezes: one inside a
      // transaction (the password change), one alone (a payment's read).
      const direct = database.directUrl ?? database.url;
      const holder = await session(direct);
      const watcher = await session(direct);
      await holder.query('begin');
      await holder.query('select id from assets where id = $1 for update', [assetId]);
      await holder.query('lock table session_payments in access exclusive mode');
      const stuckChange = changePassword(assetId);
      const stuckRead = call(oneUrl('pmt_frozen'));
      await waitForLockWaiters(watcher, 2);
      proxy.freeze();

      // The server's own cancel (57014, at the statement timeout) never arrives: only the guard
      // ends the waits, in each family's 503. A read alone says why; in a transaction the failed
      // ROLLBACK after it is what drizzle throws, which says the connection is lost.
      const read = await stuckRead;
      expect(read.status).toBe(503);
      expect(await read.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: `The database did not answer within ${GUARD_LIMIT_MS} ms`, status: 503 });
      const change = await stuckChange;
      expect(change.status).toBe(503);
      expect(await change.json()).toEqual({ type: 'SERVICE_UNAVAILABLE', code: 'DATABASE_UNAVAILABLE', message: expect.any(String) });
      for (const answer of [read, change]) expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);

      // Readiness answers within its 2 s meanwhile, and says not ready.
      const readiness = await Promise.race([fetch(`${base}/readyz`).then((res) => res.status), sleep(2000, 'no answer' as const)]);
      expect(readiness).toBe(503);

      await holder.query('rollback');
      proxy.resume();
      // Ready again once the network carries bytes; the bound is a safety net, not a speed check.
      let ready = 0;
      for (let i = 0; i < 200 && ready !== 200; i++) {
        ready = (await fetch(`${base}/readyz`)).status;
        if (ready !== 200) await sleep(100);
      }
      expect(ready).toBe(200);
      const after = await changePassword(assetId);
      expect(after.status, await after.text()).toBe(200);

      expect({ exitCode: child.exitCode, signal: child.signalCode }).toEqual({ exitCode: null, signal: null });
      expect(service.output.stderr).toBe('');
    },
    90_000,
  );

  it('a query that takes longer than the limit while its answer keeps arriving is not cut (PostgreSQL)', async () => {
    const server = await createServerDatabase();
    const database = await openDatabase({ url: server.url, directUrl: server.directUrl, statementTimeoutMs: 300, poolMax: 1 });
    try {
      // Ten statements of 0.2 s in one simple query, each under the statement timeout (which
      // holds per statement), each sending a row larger than the server's send buffer, so bytes
      // arrive every 0.2 s for 2 s: longer than the guard's limit (1.3 s), never silent that long.
      const statements = Array.from({ length: 10 }, () => "select pg_sleep(0.2), repeat('x', 20000) as filler").join('; ');
      // drizzle keeps the pool it was given as $client; a query object goes out as it is, in the
      // simple protocol, which alone takes several statements
      const pool = (database.db as unknown as { $client: pg.Pool }).$client;
      const results = (await pool.query(new pg.Query(statements) as unknown as string)) as unknown as pg.QueryResult[];
      expect(results.map((r) => r.rows.length)).toEqual(Array(10).fill(1));
      // the same connection still serves
      expect((await pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await database.close();
      await server.drop();
    }
  });
});
