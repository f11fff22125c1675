import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { AppError } from '../kernel/errors.js';
import type { Database, Db } from './database.js';
import { ignore, PING_TIMEOUT_MS, withDeadline } from './deadline.js';
import { connectionSettings } from './pooler.js';
import { guardSilentConnections } from './silent-connections.js';
import { postgresStartupWork } from './startup-lock.js';

// Beyond the statement timeout (which the server enforces), a connection whose query has received
// nothing for this much longer is given up (silent-connections.ts): a server that vanished without
// closing the socket, or a network that stopped carrying its bytes, must not hold a request.
const SILENCE_MARGIN_MS = 1000;
// How often each pool looks at its connections for that: a silent query fails at most this late.
const SILENCE_SWEEP_MS = 500;
const APPLICATION_NAME = 'charging-network-service';

export interface PostgresSettings {
  url: string;
  // The server itself, for what needs a session of its own (the start-up lock, migrations,
  // LISTEN). When given, `url` is a transaction-mode pooler (see pooler.ts).
  directUrl: string | undefined;
  poolMax: number;
  statementTimeoutMs: number | undefined;
  acquireTimeoutMs: number | undefined;
}

// A checked-out client has no 'error' listener of the pool's, so a connection lost between two
// queries of a request would be an unhandled 'error' event: an uncaught exception that stops the
// process. The query in flight is rejected anyway, and the pool discards a client that is no
// longer queryable when it is released.
function neverCrashOnLostConnections(pool: pg.Pool): void {
  pool.on('error', ignore);
  pool.on('connect', (client) => client.on('error', ignore));
}

export async function openPostgres(settings: PostgresSettings): Promise<Database> {
  const { url, poolMax, statementTimeoutMs, acquireTimeoutMs } = settings;
  const behindPooler = settings.directUrl !== undefined;
  const pool = new pg.Pool({
    connectionString: url,
    application_name: APPLICATION_NAME,
    max: poolMax,
    // Bounds both the wait for a free client and the opening of a new connection.
    ...(acquireTimeoutMs ? { connectionTimeoutMillis: acquireTimeoutMs } : {}),
    ...connectionSettings({ statementTimeoutMs, queryTimeoutMs: undefined }, behindPooler),
    keepAlive: true,
  });
  neverCrashOnLostConnections(pool);
  const guard = statementTimeoutMs ? guardSilentConnections(pool, statementTimeoutMs + SILENCE_MARGIN_MS, SILENCE_SWEEP_MS) : undefined;
  // Readiness has a connection of its own: a pool full of requests waiting on a lock says nothing
  // about whether the database answers, and must not make the probe wait behind them. Its queries
  // are rare, so pg's timer per query guards it: it frees the one connection of a probe that got
  // no answer (ping's deadline only stops waiting for it), so that a later probe can connect anew.
  const probe = new pg.Pool({
    connectionString: url,
    application_name: `${APPLICATION_NAME}/readiness`,
    max: 1,
    connectionTimeoutMillis: PING_TIMEOUT_MS,
    ...connectionSettings({ statementTimeoutMs: PING_TIMEOUT_MS, queryTimeoutMs: PING_TIMEOUT_MS }, behindPooler),
    keepAlive: true,
  });
  neverCrashOnLostConnections(probe);

  const db = drizzlePg(pool) as unknown as Db;
  const clientDbs = new WeakMap<pg.PoolClient, Db>();
  // drizzle's own pool transaction sends BEGIN outside its try (a failed BEGIN leaks the client)
  // and always returns the client to the pool, broken or not. This one checks a client out itself,
  // lets drizzle run the transaction on that client alone, and discards the client after any
  // failure other than a domain error (which drizzle has rolled back on a healthy connection).
  db.transaction = (async (fn: Parameters<Db['transaction']>[0], config?: Parameters<Db['transaction']>[1]) => {
    const client = await pool.connect();
    let failure: Error | undefined;
    try {
      let clientDb = clientDbs.get(client);
      if (!clientDb) {
        clientDb = drizzlePg(client) as unknown as Db;
        clientDbs.set(client, clientDb);
      }
      return await clientDb.transaction(fn, config);
    } catch (error) {
      if (!(error instanceof AppError)) failure = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(failure);
    }
  }) as Db['transaction'];

  const direct = settings.directUrl ?? url;
  return {
    db,
    kind: 'postgres',
    connectionString: direct,
    async ping() {
      await withDeadline(probe.query('select 1'), PING_TIMEOUT_MS);
    },
    ...postgresStartupWork(direct, APPLICATION_NAME),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      guard?.stop();
      await Promise.all([pool.end(), probe.end()]);
    },
  };
}
