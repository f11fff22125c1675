import { fileURLToPath } from 'node:url';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgliteDatabase } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import type { Database, Db } from './database.js';
import { ignore } from './deadline.js';

// Migrations, and the start-up lock they run under: the part of a Database that start-up work
// (the migrations themselves, the signing key, the bootstrap client) goes through.
type StartupWork = Pick<Database, 'migrate' | 'withStartupLock'>;

const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations', import.meta.url));
// Arbitrary but fixed: identifies this service's start-up lock in pg_locks.
export const STARTUP_LOCK_KEY = 7_240_311_902;

// Migrates (once per handle: the migrations this code ships do not change while it runs), then
// runs fn, while holding a cluster-wide advisory lock, so that start-up work happens once even
// when several replicas start together. `url` must reach the server itself: the lock is the
// session's, which a transaction-mode pooler would hand to another client after the first statement.
export function postgresStartupWork(url: string, applicationName: string): StartupWork {
  let migrated = false;
  const withStartupLock = async <T>(fn: (db: Db) => Promise<T>): Promise<T> => {
    // A connection of its own, without the statement and query timeouts: waiting while another
    // replica migrates, and migrating, may take longer than any request may. Ending the
    // connection releases the lock whatever happened.
    const client = new pg.Client({ connectionString: url, application_name: applicationName, keepAlive: true });
    client.on('error', ignore);
    await client.connect();
    try {
      await client.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
      const lockedDb = drizzlePg(client);
      if (!migrated) {
        await migratePg(lockedDb, { migrationsFolder: MIGRATIONS_FOLDER });
        migrated = true;
      }
      return await fn(lockedDb as unknown as Db);
    } finally {
      await client.end().catch(ignore);
    }
  };
  return { withStartupLock, migrate: () => withStartupLock(async () => undefined) };
}

// PGlite is single-connection and single-process: there is nobody to race with.
export function pgliteStartupWork(db: PgliteDatabase): StartupWork {
  let migration: Promise<void> | undefined;
  // Callers at the same time share one run; a failed one is tried again by the next call.
  const migrate = () =>
    (migration ??= migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER }).catch((error: unknown) => {
      migration = undefined;
      throw error;
    }));
  return {
    migrate,
    async withStartupLock(fn) {
      await migrate();
      return fn(db as unknown as Db);
    },
  };
}
