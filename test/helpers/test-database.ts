import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';

// Every test app gets a database of its own, so no test depends on another's rows: in-memory
// PGlite by default, or a throwaway database on the server named by DATABASE_URL.
export interface TestDatabaseOptions {
  poolMax?: number;
  statementTimeoutMs?: number;
  acquireTimeoutMs?: number;
}

export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<Database> {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const snapshot = inject('pgliteSnapshot');
    return openDatabase({ ...options, pgliteSnapshot: snapshot ? new Blob([readFileSync(snapshot)]) : undefined });
  }
  const server = await createServerDatabase();
  const database = await openDatabase({ poolMax: 20, ...options, url: server.url });
  return {
    ...database,
    async close() {
      await database.close();
      await server.drop();
    },
  };
}

// An empty throwaway database on the server named by DATABASE_URL, for code (or a child process)
// that opens it by URL itself.
export async function createServerDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('createServerDatabase needs DATABASE_URL');
  const name = `cns_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${name}`;
  return {
    name,
    url: dbUrl.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

// The URL of a test app's own PostgreSQL database. Needs DATABASE_URL.
export function databaseUrlOf(database: Database): string {
  if (!database.connectionString) throw new Error('this test database is not on a PostgreSQL server (DATABASE_URL)');
  return database.connectionString;
}

// A session of its own on a test app's PostgreSQL database, as another process would have (to
// hold locks, terminate backends). Needs DATABASE_URL.
export async function otherSession(database: Database): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrlOf(database) });
  await client.connect();
  return client;
}

// Until `count` sessions of the database (seen through `watcher`) wait on a lock, each for at
// least `minimumWaitMs`. A safety net against a hang, not a speed check.
export async function waitForLockWaiters(watcher: pg.Client, count: number, minimumWaitMs = 0): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const { rows } = await watcher.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and now() - query_start >= $1 * interval '1 millisecond'`,
      [minimumWaitMs],
    );
    if (rows[0]!.n >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`fewer than ${count} sessions started waiting for a lock`);
}

