import { sql, type SQL } from 'drizzle-orm';
import { PgDialect, type PgDatabase, type PgQueryResultHKT } from 'drizzle-orm/pg-core';
import type { DataDirHolder } from './data-dir-lock.js';
import { DEFAULT_TEMPLATE_DIR } from './pglite-template.js';
import { openPglite } from './pglite-database.js';
import { openPostgres } from './postgres-database.js';

// The connections: what the code is handed to query with (Db, a transaction's Tx), and the one
// place that opens either database. What a failure means is failures.ts's; PGlite is
// pglite-database.ts's, the server's pools postgres-database.ts's; migrations run under the
// start-up lock of startup-lock.ts.

// Repositories write plain Drizzle (select, insert, sql``); none uses the relational `db.query`
// API, so the connections carry no schema object and db/ names no area's tables.
export type Db = PgDatabase<PgQueryResultHKT>;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type Executor = Db | Tx;

// The rows of a raw statement. Both drivers answer db.execute with `{ rows }` (column names as
// written, values as the driver parses them), which drizzle's type for it does not say.
export async function rowsOf<T>(db: Executor, query: SQL): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}

// Both connections are made without a casing option, so a dialect of drizzle's defaults renders
// a statement as their own would.
const dialect = new PgDialect();

// The same, as a named statement: on PostgreSQL each connection parses it once, and once the
// server finds a generic plan as good as its custom ones it stops planning it on every run, which
// for the delivery worker's statements cost as much as running them or a third of it
// (docs/events.md, "Delivery and retries"). The text must not vary between runs: a name stands
// for one text on a connection. PGlite ignores the name; the pooler's connections send it unnamed
// (src/db/pooler.ts).
export async function namedRowsOf<T>(db: Executor, name: string, query: SQL): Promise<T[]> {
  const prepared = db._.session.prepareQuery(dialect.sqlToQuery(query), undefined, name, false);
  return ((await prepared.execute()) as { rows: T[] }).rows;
}

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  // PostgreSQL: the server itself, for a dedicated connection of its own (LISTEN, session
  // locks) outside the pool: the direct URL when one is given, else the pool's.
  connectionString?: string;
  ping(): Promise<void>;
  // Brings the database to the migrations this code ships, under the start-up lock; once done by
  // this handle, later calls (and withStartupLock) skip it.
  migrate(): Promise<void>;
  // Runs fn while holding a cluster-wide advisory lock, the database migrated first: start-up
  // work (signing key, bootstrap client) must happen once even when several replicas start together.
  withStartupLock<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  // PGlite only: the data directory as a tarball (test snapshots)
  dumpDataDir?(): Promise<Blob>;
  // PostgreSQL only: the request pool's connections now (PGlite has one in-process connection
  // and no pool).
  poolStats?(): PoolStats;
}

export interface PoolStats {
  // open connections, idle or in use
  total: number;
  idle: number;
  // queries waiting for a connection
  waiting: number;
}

export interface DatabaseOptions {
  url?: string | undefined;
  // PostgreSQL: the server itself, when `url` is a transaction-mode pooler (DATABASE_DIRECT_URL).
  // It carries what needs a session of its own: migrations under the start-up lock, LISTEN.
  directUrl?: string | undefined;
  // PostgreSQL: the password, when it is not in the URLs (DATABASE_PASSWORD(_FILE)); both take it.
  password?: string | undefined;
  poolMax?: number;
  // PGlite data directory; undefined means in memory (tests)
  dataDir?: string | undefined;
  // Who takes the data directory's lock, named to a second process that is refused (PGlite only).
  holder?: DataDirHolder | undefined;
  // An in-memory PGlite starts from this dumped data directory instead of running initdb (tests
  // start hundreds of databases; initdb is ~3 s of each, loading a migrated snapshot ~0.5 s).
  pgliteSnapshot?: Blob | undefined;
  // An empty dataDir is copied from this pre-initialised data directory (see pglite-template.ts);
  // without a usable one there, PGlite runs initdb. Default: the one `npm run build` makes.
  pgliteTemplateDir?: string | undefined;
  // PostgreSQL only (PGlite cannot interrupt a running statement, nor has it a pool to wait for).
  // Unset means no limit: the service passes its configuration, tools (seeding, CLI) may run long.
  statementTimeoutMs?: number | undefined;
  acquireTimeoutMs?: number | undefined;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.url
    ? openPostgres({
        url: withPassword(options.url, options.password),
        directUrl: options.directUrl === undefined ? undefined : withPassword(options.directUrl, options.password),
        poolMax: options.poolMax ?? 10,
        statementTimeoutMs: options.statementTimeoutMs,
        acquireTimeoutMs: options.acquireTimeoutMs,
      })
    : openPglite(options.dataDir, {
        snapshot: options.pgliteSnapshot,
        templateDir: options.pgliteTemplateDir ?? DEFAULT_TEMPLATE_DIR,
        holder: options.holder ?? 'server',
      });
}

// The password goes into the URL here, percent-encoded, so whatever characters it holds reach
// pg intact (pg decodes it); the operator's URL never needs escaping. A URL without a host (a Unix
// socket named by `?host=/run/postgresql`) cannot hold one before its `@`, and URL drops it
// there without a word: it goes in the `password` query parameter, which pg reads as well. pg
// prefers that parameter to a password before the `@`, so a URL that has one loses it either way.
export function withPassword(url: string, password: string | undefined): string {
  if (password === undefined) return url;
  const parsed = new URL(url);
  if (parsed.hostname === '') {
    parsed.searchParams.set('password', password);
  } else {
    parsed.searchParams.delete('password');
    parsed.password = encodeURIComponent(password);
  }
  return parsed.toString();
}

export { sql };
