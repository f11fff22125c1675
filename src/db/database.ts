import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import * as schema from './schema.js';

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type Executor = Db | Tx;

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  ping(): Promise<void>;
  // Runs fn while holding a cluster-wide advisory lock: start-up work (migrations, signing key,
  // bootstrap client) must happen once even when several replicas start together.
  withStartupLock<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  // PGlite only: the data directory as a tarball (test snapshots)
  dumpDataDir?(): Promise<Blob>;
}

export interface DatabaseOptions {
  url?: string | undefined;
  poolMax?: number;
  // PGlite data directory; undefined means in memory (tests)
  dataDir?: string | undefined;
  // An in-memory PGlite starts from this dumped data directory instead of running initdb (tests
  // start hundreds of databases; initdb is ~3 s of each, loading a migrated snapshot ~0.5 s).
  pgliteSnapshot?: Blob | undefined;
}

const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations', import.meta.url));
// Arbitrary but fixed: identifies this service's start-up lock in pg_locks.
const STARTUP_LOCK_KEY = 7_240_311_902;

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.url ? openPostgres(options.url, options.poolMax ?? 10) : openPglite(options.dataDir, options.pgliteSnapshot);
}

async function openPostgres(url: string, poolMax: number): Promise<Database> {
  const pool = new pg.Pool({ connectionString: url, max: poolMax, application_name: 'charging-network-service' });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = drizzlePg(pool, { schema }) as unknown as Db;
  return {
    db,
    kind: 'postgres',
    async ping() {
      await pool.query('select 1');
    },
    async withStartupLock(fn) {
      const client = await pool.connect();
      try {
        await client.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
        try {
          const lockedDb = drizzlePg(client, { schema });
          await migratePg(lockedDb as NodePgDatabase<Schema>, { migrationsFolder: MIGRATIONS_FOLDER });
          return await fn(lockedDb as unknown as Db);
        } finally {
          await client.query('select pg_advisory_unlock($1)', [STARTUP_LOCK_KEY]);
        }
      } finally {
        client.release();
      }
    },
    async close() {
      await pool.end();
    },
  };
}

async function openPglite(dataDir: string | undefined, snapshot: Blob | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const client = dataDir ? new PGlite(dataDir) : new PGlite(snapshot ? { loadDataDir: snapshot } : {});
  await client.waitReady;
  const db = drizzlePglite(client, { schema });
  return {
    db: db as unknown as Db,
    kind: 'pglite',
    async ping() {
      await client.query('select 1');
    },
    async withStartupLock(fn) {
      // PGlite is single-connection and single-process: there is nobody to race with.
      await migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER });
      return fn(db as unknown as Db);
    },
    async close() {
      if (!client.closed) await client.close();
    },
    async dumpDataDir() {
      return client.dumpDataDir('none');
    },
  };
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = findPgError(error);
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

export function findPgError(error: unknown): { code?: string; constraint?: string } | undefined {
  // drizzle wraps driver errors; the driver error (with the SQLSTATE) is on `cause`.
  let e: unknown = error;
  for (let i = 0; i < 5 && e; i++) {
    if (typeof e === 'object' && e !== null && 'code' in e && typeof (e as { code: unknown }).code === 'string') {
      const code = (e as { code: string }).code;
      if (/^[0-9A-Z]{5}$/.test(code)) return e as { code: string; constraint?: string };
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export { sql };
