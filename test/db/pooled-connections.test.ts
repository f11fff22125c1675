// How the service's pool speaks to PostgreSQL with and without DATABASE_DIRECT_URL. With it, the
// pool's URL is taken for a transaction-mode pooler: the connections carry no startup parameter
// the pooler would refuse, name no statement, leave no setting on the session, and still run every
// statement under the statement timeout. Without it nothing changes: the statement timeout is a
// startup parameter and the list is a named prepared statement, parsed once per connection.
// Here both modes talk to the server itself (one pooled connection, so what the session holds can
// be read back); test/e2e/pooler.test.ts runs the service through a real PgBouncer.
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, rowsOf, sql, type Database } from '../../src/db/database.js';
import { findPgError } from '../../src/db/failures.js';
import { listPaymentsJson } from '../../src/payments/payments-repository.js';
import { createServerDatabase } from '../helpers/test-database.js';

const STATEMENT_TIMEOUT_MS = 400;

// What the session itself holds, read with a query object pg sends as it is (the pool's client
// only rewrites plain queries), on the pool's one connection.
async function sessionState(database: Database): Promise<{ timeout: string; prepared: string[] }> {
  // drizzle keeps the pool it was given as $client
  const pool = (database.db as unknown as { $client: pg.Pool }).$client;
  const query = (text: string) => pool.query(new pg.Query(text) as unknown as string) as unknown as Promise<pg.QueryResult>;
  const timeout = (await query('show statement_timeout')).rows[0] as { statement_timeout: string };
  const prepared = (await query('select name from pg_prepared_statements order by name')).rows as { name: string }[];
  return { timeout: timeout.statement_timeout, prepared: prepared.map((r) => r.name) };
}

async function sqlstateOf(work: Promise<unknown>): Promise<string | undefined> {
  try {
    await work;
  } catch (error) {
    return findPgError(error)?.code;
  }
  return 'none';
}

// The parameters of every startup packet sent to it, by a listener that then hangs up.
async function startupPackets(connect: (url: string) => Promise<void>): Promise<Record<string, string>[]> {
  const packets: Record<string, string>[] = [];
  const server = createServer((socket) => {
    socket.once('data', (data: Buffer) => {
      // length, protocol version, then name\0value\0 pairs up to an empty name
      const fields = data.subarray(8, data.readInt32BE(0) - 1).toString('utf8').split('\0');
      const packet: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) packet[fields[i]!] = fields[i + 1]!;
      packets.push(packet);
      socket.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    await connect(`postgres://cns@127.0.0.1:${(server.address() as AddressInfo).port}/cns`);
  } finally {
    server.close();
  }
  return packets;
}

// Opens the database at `url`, sends a statement through the pool and pings (the readiness pool).
function openAndQuery(options: { directUrl?: string }) {
  return async (url: string) => {
    const database = await openDatabase({ url, ...options, statementTimeoutMs: STATEMENT_TIMEOUT_MS, acquireTimeoutMs: 1000 });
    await database.db.execute(sql`select 1`).catch(() => undefined);
    await database.ping().catch(() => undefined);
    await database.close();
  };
}

describe('the startup packet of the pooled connections', () => {
  it('without DATABASE_DIRECT_URL carries the statement timeout', async () => {
    const packets = await startupPackets(openAndQuery({}));
    expect(packets.length).toBe(2);
    for (const packet of packets) expect(packet).toMatchObject({ user: 'cns', database: 'cns', statement_timeout: expect.any(String) });
  });

  it('with DATABASE_DIRECT_URL carries only what PgBouncer 1.18 accepts from any client (user, database and the parameters it tracks)', async () => {
    const accepted = ['user', 'database', 'application_name', 'client_encoding', 'DateStyle', 'TimeZone', 'standard_conforming_strings'];
    const packets = await startupPackets(openAndQuery({ directUrl: 'postgres://cns@127.0.0.1:9/cns' }));
    expect(packets.length).toBe(2);
    for (const packet of packets) {
      expect(packet).toMatchObject({ user: 'cns', database: 'cns' });
      expect(Object.keys(packet).filter((name) => !accepted.includes(name))).toEqual([]);
    }
  });
});

const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('the pool with and without a transaction-mode pooler in front (PostgreSQL)', () => {
  let server: Awaited<ReturnType<typeof createServerDatabase>>;
  // the server itself, whichever pass runs this file
  let serverUrl: string;

  beforeAll(async () => {
    server = await createServerDatabase();
    serverUrl = server.directUrl ?? server.url;
    const migrator = await openDatabase({ url: serverUrl, poolMax: 1 });
    await migrator.migrate();
    await migrator.close();
  });
  afterAll(async () => {
    await server?.drop();
  });

  it('without DATABASE_DIRECT_URL: the statement timeout is a startup parameter and the list a named prepared statement (PostgreSQL)', async () => {
    const database = await openDatabase({ url: serverUrl, poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS });
    try {
      expect(await listPaymentsJson(database.db, { network: null }, ['ses_pooled_1'])).toBe('[]');
      expect(await listPaymentsJson(database.db, { network: 'net_pooled' }, ['ses_pooled_1'])).toBe('[]');
      expect(await sessionState(database)).toEqual({ timeout: `${STATEMENT_TIMEOUT_MS}ms`, prepared: ['session_payments_list', 'session_payments_list_network'] });
    } finally {
      await database.close();
    }
  });

  it('with DATABASE_DIRECT_URL: no statement name and no setting left on the session (PostgreSQL)', async () => {
    const database = await openDatabase({ url: serverUrl, directUrl: serverUrl, poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS });
    try {
      expect(await listPaymentsJson(database.db, { network: null }, ['ses_pooled_1'])).toBe('[]');
      expect(await listPaymentsJson(database.db, { network: 'net_pooled' }, ['ses_pooled_1'])).toBe('[]');
      await database.db.transaction(async (tx) => {
        await tx.execute(sql`select 1`);
      });
      expect(await sessionState(database)).toEqual({ timeout: '0', prepared: [] });
    } finally {
      await database.close();
    }
  });

  it('with DATABASE_DIRECT_URL: a single statement, and every statement of a transaction, runs under the timeout, which ends with it (PostgreSQL)', async () => {
    const database = await openDatabase({ url: serverUrl, directUrl: serverUrl, poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS });
    try {
      const setting = sql`select current_setting('statement_timeout') as timeout`;
      expect(await rowsOf(database.db, setting)).toEqual([{ timeout: `${STATEMENT_TIMEOUT_MS}ms` }]);
      expect(await sqlstateOf(database.db.execute(sql`select pg_sleep(3)`))).toBe('57014');
      const inTransaction = await database.db.transaction(async (tx) => {
        const first = await rowsOf(tx, setting);
        await tx.execute(sql`select pg_sleep(0.01)`);
        return [...first, ...(await rowsOf(tx, setting))];
      });
      expect(inTransaction).toEqual([{ timeout: `${STATEMENT_TIMEOUT_MS}ms` }, { timeout: `${STATEMENT_TIMEOUT_MS}ms` }]);
      expect(
        await sqlstateOf(
          database.db.transaction(async (tx) => {
            await tx.execute(sql`select 1`);
            await tx.execute(sql`select pg_sleep(3)`);
          }),
        ),
      ).toBe('57014');
      // The session carries on: a cancelled statement left nothing behind.
      expect(await rowsOf(database.db, sql`select 1 as one`)).toEqual([{ one: 1 }]);
      expect((await sessionState(database)).timeout).toBe('0');
    } finally {
      await database.close();
    }
  });

  it('with DATABASE_DIRECT_URL: migrations and the start-up lock use the direct URL, and so does LISTEN (connectionString) (PostgreSQL)', async () => {
    // A pool URL nobody answers at: only the direct URL can have done the start-up work.
    const nobody = new URL(serverUrl);
    nobody.hostname = '127.0.0.1';
    nobody.port = '9';
    const database = await openDatabase({ url: nobody.toString(), directUrl: serverUrl, poolMax: 1, acquireTimeoutMs: 1000 });
    try {
      expect(await database.withStartupLock(async (db) => rowsOf(db, sql`select count(*)::int as n from drizzle.__drizzle_migrations`))).toEqual([
        { n: expect.any(Number) },
      ]);
      expect(database.connectionString).toBe(serverUrl);
      await expect(database.db.execute(sql`select 1`)).rejects.toThrow();
    } finally {
      await database.close();
    }
  });
});
