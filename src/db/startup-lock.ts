import { fileURLToPath } from 'node:url';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgliteDatabase } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { ignore } from './deadline.js';
import * as schema from './schema.js';

type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations', import.meta.url));
// Arbitrary but fixed: identifies this service's start-up lock in pg_locks.
export const STARTUP_LOCK_KEY = 7_240_311_902;

// Migrates, then runs fn, while holding a cluster-wide advisory lock: start-up work (migrations,
// signing key, bootstrap client) must happen once even when several replicas start together.
// `url` must reach the server itself: the lock is the session's, which a transaction-mode pooler
// would hand to another client after the first statement.
export async function withPostgresStartupLock<T>(url: string, applicationName: string, fn: (db: Db) => Promise<T>): Promise<T> {
  // A connection of its own, without the statement and query timeouts: waiting while another
  // replica migrates, and migrating, may take longer than any request may. Ending the connection
  // releases the lock whatever happened.
  const client = new pg.Client({ connectionString: url, application_name: applicationName, keepAlive: true });
  client.on('error', ignore);
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
    const lockedDb = drizzlePg(client, { schema });
    await migratePg(lockedDb as NodePgDatabase<typeof schema>, { migrationsFolder: MIGRATIONS_FOLDER });
    return await fn(lockedDb as unknown as Db);
  } finally {
    await client.end().catch(ignore);
  }
}

// PGlite is single-connection and single-process: there is nobody to race with.
export async function withPgliteMigrated<T>(db: PgliteDatabase<typeof schema>, fn: (db: Db) => Promise<T>): Promise<T> {
  await migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER });
  return fn(db as unknown as Db);
}
