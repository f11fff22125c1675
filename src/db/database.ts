import { sql, type SQL } from 'drizzle-orm';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { AppError, ServiceUnavailableError } from '../errors.js';
import type { DataDirHolder } from './data-dir-lock.js';
import { isNetworkFailure } from './network-failures.js';
import { DEFAULT_TEMPLATE_DIR } from './pglite-template.js';
import { openPglite } from './pglite-database.js';
import { openPostgres } from './postgres-database.js';
import * as schema from './schema.js';

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type Executor = Db | Tx;

// The rows of a raw statement. Both drivers answer db.execute with `{ rows }` (column names as
// written, values as the driver parses them), which drizzle's type for it does not say.
export async function rowsOf<T>(db: Executor, query: SQL): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  // PostgreSQL: the server itself, for a dedicated connection of its own (LISTEN, session
  // locks) outside the pool: the direct URL when one is given, else the pool's.
  connectionString?: string;
  ping(): Promise<void>;
  // Runs fn while holding a cluster-wide advisory lock: start-up work (migrations, signing key,
  // bootstrap client) must happen once even when several replicas start together.
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

export { STARTUP_LOCK_KEY } from './startup-lock.js';

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
// pg intact (pg decodes it); the operator's URL never needs escaping.
export function withPassword(url: string, password: string | undefined): string {
  if (password === undefined) return url;
  const parsed = new URL(url);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = findPgError(error);
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

// An error and its causes, outermost first: drizzle wraps the driver's error, which is on `cause`.
function* causeChain(error: unknown): Generator<object> {
  const seen = new Set<unknown>();
  for (let e = error; typeof e === 'object' && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    yield e;
  }
}

export function findPgError(error: unknown): { code?: string; constraint?: string } | undefined {
  for (const e of causeChain(error)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return e as { code: string; constraint?: string };
  }
  return undefined;
}

// SQLSTATEs after which the same request may succeed if sent again: the statement was cancelled
// (statement timeout), the connection was lost or refused, the server is starting or stopping,
// it has no connection slot free, or a concurrent transaction made this one give up (deadlock,
// serialization failure, lock not available). Class 08 (connection exception) is added below.
// Everything else (constraint violations, bad SQL) is a bug or a rule and is not retried.
const UNAVAILABLE_SQLSTATES = new Set(['57014', '57P01', '57P02', '57P03', '53300', '40001', '40P01', '55P03', '25P03']);
// pg, pg-pool and PGlite report these without a code; the first two are timeouts.
const TIMEOUT_MESSAGES = [/^timeout exceeded when trying to connect/i, /^Query read timeout/];
const UNAVAILABLE_MESSAGES = [...TIMEOUT_MESSAGES, /^Connection terminated/, /is not queryable/, /^Cannot use a pool after calling end/, /^PGlite is closed/];

function unavailableMessage(code: string | undefined): string {
  if (code === '57014') return 'The database did not answer in time; retry later';
  if (code === '53300') return 'The database has no free connection; retry later';
  if (code === '40001' || code === '40P01' || code === '55P03') return 'A concurrent change got in the way; retry';
  return 'The database is unavailable; retry later';
}

// The one place that decides which database failures are "unavailable, retry" (503): it walks the
// cause chain, since drizzle wraps the driver's error. null means the error is not one of them.
// The socket codes are not the database's alone; the service's other network calls (key server,
// Redis) handle their own failures and never let a raw socket error reach a request.
export function classifyDatabaseError(error: unknown): ServiceUnavailableError | null {
  for (const e of causeChain(error)) {
    if (e instanceof ServiceUnavailableError) return e;
    // An error that already says what it means to the client (a domain error, an HTTP error) was
    // decided where it was thrown, whatever its cause: a 401 for an unreachable key server stays 401.
    if (e instanceof AppError || typeof (e as { statusCode?: unknown }).statusCode === 'number') return null;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (isNetworkFailure(e)) return new ServiceUnavailableError(unavailableMessage(undefined), { cause: e });
      if (/^[0-9A-Z]{5}$/.test(code) && (UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08'))) {
        return new ServiceUnavailableError(unavailableMessage(code), { cause: e, timedOut: code === '57014' });
      }
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))) {
      return new ServiceUnavailableError(unavailableMessage(undefined), { cause: e, timedOut: TIMEOUT_MESSAGES.some((pattern) => pattern.test(message)) });
    }
  }
  return null;
}

// For the /metrics counter of database errors, a label of three values: the database did not
// answer in time, was otherwise unavailable (the 503s of classifyDatabaseError), or refused the
// statement (any other SQL error). null: not a database error (a shutdown 503 included).
export type DatabaseErrorClass = 'timeout' | 'unavailable' | 'other';

export function databaseErrorClass(error: unknown): DatabaseErrorClass | null {
  const unavailable = classifyDatabaseError(error);
  if (unavailable) return unavailable.code !== 'DATABASE_UNAVAILABLE' ? null : unavailable.timedOut ? 'timeout' : 'unavailable';
  return findPgError(error) || [...causeChain(error)].some((e) => e instanceof DrizzleQueryError) ? 'other' : null;
}

// What a failed query may put in a log line. drizzle's wrapper lists the query's parameters in
// its message (a password hash, a client's network), and the driver's error carries them too
// (`params`), as do its `detail` (Key (x)=(value)) and the quoted input in its message: a line
// keeps the SQL text, the SQLSTATE and where the server raised it, with quoted values masked.
export function loggableError(error: unknown): unknown {
  if (error instanceof DrizzleQueryError) return { type: 'DrizzleQueryError', query: error.query, cause: loggableError(error.cause) };
  const driver = findPgError(error);
  if (driver && driver === error) {
    const e = error as { name?: unknown; message?: unknown; severity?: unknown; constraint?: unknown; table?: unknown; column?: unknown; routine?: unknown };
    return {
      type: typeof e.name === 'string' ? e.name : 'DatabaseError',
      code: driver.code,
      message: typeof e.message === 'string' ? e.message.replace(/"[^"]*"/g, '"…"') : undefined,
      severity: e.severity,
      constraint: e.constraint,
      table: e.table,
      column: e.column,
      routine: e.routine,
    };
  }
  return error;
}

export { sql };
