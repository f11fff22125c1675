import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';

// Every test app gets a database of its own, so no test depends on another's rows: in-memory
// PGlite by default, or a throwaway database on the server named by DATABASE_URL. With
// DATABASE_DIRECT_URL as well (the pooler pass), DATABASE_URL is a transaction-mode pooler in
// front of that server: the service's pools go through it, and what needs a session of its own
// (creating databases, locks held by "another process") goes to the server directly.
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
  const database = await openDatabase({ poolMax: 20, ...options, url: server.url, directUrl: server.directUrl });
  return {
    ...database,
    async close() {
      await database.close();
      await server.drop();
    },
  };
}

// An empty throwaway database on the server named by DATABASE_URL, for code (or a child process)
// that opens it by URL itself: `env` holds the variables a service process needs to reach it.
export async function createServerDatabase(): Promise<{
  name: string;
  url: string;
  directUrl: string | undefined;
  env: { DATABASE_URL: string; DATABASE_DIRECT_URL?: string };
  drop(): Promise<void>;
}> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('createServerDatabase needs DATABASE_URL');
  const direct = process.env.DATABASE_DIRECT_URL || undefined;
  const admin = direct ?? url;
  const name = `cns_test_${randomBytes(6).toString('hex')}`;
  await adminQuery(admin, `CREATE DATABASE ${name}`);
  const dbUrl = withDatabaseName(url, name);
  const dbDirectUrl = direct === undefined ? undefined : withDatabaseName(direct, name);
  return {
    name,
    url: dbUrl,
    directUrl: dbDirectUrl,
    env: { DATABASE_URL: dbUrl, ...(dbDirectUrl === undefined ? {} : { DATABASE_DIRECT_URL: dbDirectUrl }) },
    async drop() {
      await adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

function withDatabaseName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function adminQuery(url: string, text: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(text);
  } finally {
    await admin.end();
  }
}

// The URL of a test app's own PostgreSQL database, on the server itself (not through a pooler).
// Needs DATABASE_URL.
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

